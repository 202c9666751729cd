//! A pass over the protobuf wire format of an ONNX file *before* it is
//! decoded: it counts nodes and estimates the memory the decoded
//! `ModelProto` would take, so that a small hostile file (millions of empty
//! repeated messages, two bytes each on the wire and hundreds of bytes
//! decoded) is refused before it can exhaust memory.
//!
//! The walk knows which fields of which ONNX message hold sub-messages (the
//! field numbers of `onnx.proto`); every other field is a scalar, a string
//! or a packed array, whose decoded size follows from its wire size.
use std::mem::size_of;

use super::proto;
use crate::error::{BuildError, Result};

/// What the walk found.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct WireCensus {
    /// `NodeProto`s anywhere (graphs, subgraphs, functions).
    pub nodes: usize,
    /// Estimated bytes of the decoded `ModelProto` (an upper bound up to
    /// allocator rounding: repeated fields count twice their elements, as a
    /// growing `Vec` may hold that much).
    pub decoded_bytes: usize,
}

/// The ONNX message types the walk distinguishes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Msg {
    Model,
    Graph,
    Node,
    Attribute,
    Tensor,
    SparseTensor,
    ValueInfo,
    Type,
    TypeTensor,
    TypeSequence,
    TypeMap,
    TypeOptional,
    TypeSparse,
    TypeOpaque,
    Shape,
    Dimension,
    Segment,
    StringString,
    OpsetId,
    Training,
    Function,
    DeviceConfig,
    NodeDeviceConfig,
    ShardingSpec,
    ShardedDim,
    SimpleShardedDim,
    IntIntList,
    TensorAnnotation,
}

impl Msg {
    /// The bytes of the decoded struct itself.
    fn size(self) -> usize {
        match self {
            Msg::Model => size_of::<proto::ModelProto>(),
            Msg::Graph => size_of::<proto::GraphProto>(),
            Msg::Node => size_of::<proto::NodeProto>(),
            Msg::Attribute => size_of::<proto::AttributeProto>(),
            Msg::Tensor => size_of::<proto::TensorProto>(),
            Msg::SparseTensor => size_of::<proto::SparseTensorProto>(),
            Msg::ValueInfo => size_of::<proto::ValueInfoProto>(),
            Msg::Type => size_of::<proto::TypeProto>(),
            Msg::TypeTensor => size_of::<proto::type_proto::Tensor>(),
            Msg::TypeSequence => size_of::<proto::type_proto::Sequence>(),
            Msg::TypeMap => size_of::<proto::type_proto::Map>(),
            Msg::TypeOptional => size_of::<proto::type_proto::Optional>(),
            Msg::TypeSparse => size_of::<proto::type_proto::SparseTensor>(),
            Msg::TypeOpaque => size_of::<proto::type_proto::Opaque>(),
            Msg::Shape => size_of::<proto::TensorShapeProto>(),
            Msg::Dimension => size_of::<proto::tensor_shape_proto::Dimension>(),
            Msg::Segment => size_of::<proto::tensor_proto::Segment>(),
            Msg::StringString => size_of::<proto::StringStringEntryProto>(),
            Msg::OpsetId => size_of::<proto::OperatorSetIdProto>(),
            Msg::Training => size_of::<proto::TrainingInfoProto>(),
            Msg::Function => size_of::<proto::FunctionProto>(),
            Msg::DeviceConfig => size_of::<proto::DeviceConfigurationProto>(),
            Msg::NodeDeviceConfig => size_of::<proto::NodeDeviceConfigurationProto>(),
            Msg::ShardingSpec => size_of::<proto::ShardingSpecProto>(),
            Msg::ShardedDim => size_of::<proto::ShardedDimProto>(),
            Msg::SimpleShardedDim => size_of::<proto::SimpleShardedDimProto>(),
            Msg::IntIntList => size_of::<proto::IntIntListEntryProto>(),
            Msg::TensorAnnotation => size_of::<proto::TensorAnnotation>(),
        }
    }

    /// The message type of field `tag`, when it holds a sub-message; and
    /// whether the field is repeated (optional sub-messages of prost live
    /// inside their parent, already counted by its size, unless boxed).
    fn child(self, tag: u32) -> Option<(Msg, Field)> {
        use Field::{Boxed, Inline, Repeated};
        Some(match (self, tag) {
            (Msg::Model, 7) => (Msg::Graph, Inline),
            (Msg::Model, 8) => (Msg::OpsetId, Repeated),
            (Msg::Model, 14) => (Msg::StringString, Repeated),
            (Msg::Model, 20) => (Msg::Training, Repeated),
            (Msg::Model, 25) => (Msg::Function, Repeated),
            (Msg::Model, 26) => (Msg::DeviceConfig, Repeated),
            (Msg::Graph, 1) => (Msg::Node, Repeated),
            (Msg::Graph, 5) => (Msg::Tensor, Repeated),
            (Msg::Graph, 15) => (Msg::SparseTensor, Repeated),
            (Msg::Graph, 11..=13) => (Msg::ValueInfo, Repeated),
            (Msg::Graph, 14) => (Msg::TensorAnnotation, Repeated),
            (Msg::Graph, 16) => (Msg::StringString, Repeated),
            (Msg::Node, 5) => (Msg::Attribute, Repeated),
            (Msg::Node, 9) => (Msg::StringString, Repeated),
            (Msg::Node, 10) => (Msg::NodeDeviceConfig, Repeated),
            (Msg::Attribute, 5) => (Msg::Tensor, Inline),
            (Msg::Attribute, 6) => (Msg::Graph, Inline),
            (Msg::Attribute, 22) => (Msg::SparseTensor, Inline),
            (Msg::Attribute, 14) => (Msg::Type, Inline),
            (Msg::Attribute, 10) => (Msg::Tensor, Repeated),
            (Msg::Attribute, 11) => (Msg::Graph, Repeated),
            (Msg::Attribute, 23) => (Msg::SparseTensor, Repeated),
            (Msg::Attribute, 15) => (Msg::Type, Repeated),
            (Msg::Tensor, 3) => (Msg::Segment, Inline),
            (Msg::Tensor, 13 | 16) => (Msg::StringString, Repeated),
            (Msg::SparseTensor, 1 | 2) => (Msg::Tensor, Inline),
            (Msg::ValueInfo, 2) => (Msg::Type, Inline),
            (Msg::ValueInfo, 4) => (Msg::StringString, Repeated),
            (Msg::Type, 1) => (Msg::TypeTensor, Inline),
            (Msg::Type, 4) => (Msg::TypeSequence, Inline),
            (Msg::Type, 5) => (Msg::TypeMap, Inline),
            (Msg::Type, 9) => (Msg::TypeOptional, Inline),
            (Msg::Type, 8) => (Msg::TypeSparse, Inline),
            (Msg::Type, 7) => (Msg::TypeOpaque, Inline),
            (Msg::TypeTensor | Msg::TypeSparse, 2) => (Msg::Shape, Inline),
            (Msg::TypeSequence | Msg::TypeOptional, 1) | (Msg::TypeMap, 2) => (Msg::Type, Boxed),
            (Msg::Shape, 1) => (Msg::Dimension, Repeated),
            (Msg::Training, 1 | 2) => (Msg::Graph, Inline),
            (Msg::Training, 3 | 4) => (Msg::StringString, Repeated),
            (Msg::Function, 11) => (Msg::Attribute, Repeated),
            (Msg::Function, 7) => (Msg::Node, Repeated),
            (Msg::Function, 9) => (Msg::OpsetId, Repeated),
            (Msg::Function, 12) => (Msg::ValueInfo, Repeated),
            (Msg::Function, 14) => (Msg::StringString, Repeated),
            (Msg::NodeDeviceConfig, 2) => (Msg::ShardingSpec, Repeated),
            (Msg::ShardingSpec, 3) => (Msg::ShardedDim, Repeated),
            (Msg::ShardingSpec, 4) => (Msg::IntIntList, Repeated),
            (Msg::ShardedDim, 2) => (Msg::SimpleShardedDim, Repeated),
            (Msg::TensorAnnotation, 2) => (Msg::StringString, Repeated),
            _ => return None,
        })
    }
}

/// Where a sub-message lives in its parent.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Field {
    /// `Option<T>` inside the parent: the parent's size counts it.
    Inline,
    /// `Option<Box<T>>`: a heap allocation of its own.
    Boxed,
    /// `Vec<T>`: an element (counted twice for the vector's growth).
    Repeated,
}

/// Decoded bytes of a length-delimited field that holds no sub-message: a
/// packed array of numbers (its element count times their width, twice for
/// the vector's growth), or else a string or bytes (their length and slot).
fn decoded_len(msg: Msg, tag: u32, payload: &[u8]) -> usize {
    let width = match (msg, tag) {
        // float_data, int32_data / floats
        (Msg::Tensor, 4 | 5) | (Msg::Attribute, 7) => 4,
        // dims, int64_data, double_data, uint64_data / ints / the rest
        (Msg::Tensor, 1 | 7 | 10 | 11)
        | (Msg::Attribute, 8)
        | (Msg::SparseTensor, 3)
        | (Msg::IntIntList, 2)
        | (Msg::ShardingSpec, 2) => 8,
        _ => return 48usize.saturating_add(payload.len()),
    };
    let elems = match (msg, tag) {
        (Msg::Tensor, 4) | (Msg::Attribute, 7) => payload.len() / 4,
        (Msg::Tensor, 10) => payload.len() / 8,
        // Varints: one element ends at each byte without the high bit.
        _ => payload.iter().filter(|&&b| b < 0x80).count(),
    };
    elems.saturating_mul(width * 2).saturating_add(48)
}

/// Deepest message nesting the walk follows (prost's own limit is 100).
const MAX_NESTING: usize = 64;

/// Walks an encoded `ModelProto`.
pub fn census(bytes: &[u8]) -> Result<WireCensus> {
    let mut c = WireCensus {
        nodes: 0,
        decoded_bytes: Msg::Model.size(),
    };
    walk(bytes, Msg::Model, 0, &mut c)?;
    Ok(c)
}

fn bad(what: &str) -> BuildError {
    BuildError::Decode(format!("malformed protobuf: {what}"))
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| bad("truncated varint"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(bad("varint longer than 10 bytes"))
}

fn add(c: &mut WireCensus, bytes: usize) {
    c.decoded_bytes = c.decoded_bytes.saturating_add(bytes);
}

fn walk(buf: &[u8], msg: Msg, depth: usize, c: &mut WireCensus) -> Result<()> {
    if depth > MAX_NESTING {
        return Err(BuildError::Limit(format!(
            "messages nested deeper than {MAX_NESTING}"
        )));
    }
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let tag = u32::try_from(key >> 3).map_err(|_| bad("field number out of range"))?;
        match key & 7 {
            // A varint or fixed-width scalar: a repeated one is an element of
            // at most 8 bytes, counted twice for the vector's growth.
            0 | 1 | 5 => {
                let width = match key & 7 {
                    0 => {
                        varint(buf, &mut pos)?;
                        0
                    }
                    1 => 8,
                    _ => 4,
                };
                pos = pos
                    .checked_add(width)
                    .filter(|&p| p <= buf.len())
                    .ok_or_else(|| bad("truncated scalar"))?;
                add(c, 16);
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?)
                    .map_err(|_| bad("length out of range"))?;
                let end = pos
                    .checked_add(len)
                    .filter(|&e| e <= buf.len())
                    .ok_or_else(|| bad("length past the end of its message"))?;
                let payload = &buf[pos..end];
                pos = end;
                match msg.child(tag) {
                    Some((child, field)) => {
                        if child == Msg::Node {
                            c.nodes += 1;
                        }
                        match field {
                            Field::Inline => {}
                            Field::Boxed => add(c, child.size()),
                            Field::Repeated => add(c, child.size().saturating_mul(2)),
                        }
                        walk(payload, child, depth + 1, c)?;
                    }
                    None => add(c, decoded_len(msg, tag, payload)),
                }
            }
            _ => return Err(bad("group or unknown wire type")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    fn model_with_nodes(n: usize) -> proto::ModelProto {
        proto::ModelProto {
            graph: Some(proto::GraphProto {
                node: vec![proto::NodeProto::default(); n],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn counts_nodes_of_graphs_and_subgraphs() {
        let mut m = model_with_nodes(3);
        let sub = proto::GraphProto {
            node: vec![proto::NodeProto::default(); 2],
            ..Default::default()
        };
        m.graph.as_mut().unwrap().node[0]
            .attribute
            .push(proto::AttributeProto {
                g: Some(sub),
                ..Default::default()
            });
        let c = census(&m.encode_to_vec()).unwrap();
        assert_eq!(c.nodes, 5);
    }

    #[test]
    fn empty_messages_cost_their_struct_size() {
        let m = model_with_nodes(1000);
        let bytes = m.encode_to_vec();
        // Two bytes a node on the wire, hundreds decoded.
        assert!(bytes.len() < 3000, "{}", bytes.len());
        let c = census(&bytes).unwrap();
        assert!(
            c.decoded_bytes >= 1000 * size_of::<proto::NodeProto>(),
            "{c:?}"
        );
    }

    #[test]
    fn estimate_bounds_real_decoded_sizes_of_strings_and_arrays() {
        let t = proto::TensorProto {
            dims: vec![1000],
            float_data: vec![1.0; 1000],
            raw_data: Some(vec![7; 5000]),
            name: Some("w".repeat(300)),
            ..Default::default()
        };
        let m = proto::ModelProto {
            graph: Some(proto::GraphProto {
                initializer: vec![t],
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = census(&m.encode_to_vec()).unwrap();
        // float_data (4000 B decoded), raw_data 5000 B, the name 300 B.
        assert!(c.decoded_bytes >= 9300, "{c:?}");
        // ... and not wildly more than the wire size times 16.
        assert!(c.decoded_bytes <= 16 * m.encoded_len() + 4096, "{c:?}");
    }

    #[test]
    fn truncated_and_malformed_input_is_an_error() {
        let bytes = model_with_nodes(4).encode_to_vec();
        assert!(census(&bytes[..bytes.len() - 1]).is_err());
        assert!(census(&[0x0b]).is_err(), "a group start");
        assert!(census(&[0x3a, 0x05, 0x0a]).is_err(), "length past the end");
        assert!(census(&[0x08; 1]).is_err(), "varint missing");
    }

    #[test]
    fn nesting_beyond_the_limit_is_refused() {
        // Sequence types nest TypeProto → Sequence → TypeProto → …
        let mut t = proto::TypeProto::default();
        for _ in 0..40 {
            t = proto::TypeProto {
                value: Some(proto::type_proto::Value::SequenceType(Box::new(
                    proto::type_proto::Sequence {
                        elem_type: Some(Box::new(t)),
                    },
                ))),
                ..Default::default()
            };
        }
        let m = proto::ModelProto {
            graph: Some(proto::GraphProto {
                input: vec![proto::ValueInfoProto {
                    r#type: Some(t),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            census(&m.encode_to_vec()),
            Err(BuildError::Limit(_))
        ));
    }
}
