//! Typed access to ONNX node attributes.
use crate::onnx_file::proto;

/// The attributes of one node.
pub struct Attrs<'a> {
    node: &'a proto::NodeProto,
}

impl<'a> Attrs<'a> {
    /// Wraps a node.
    pub fn new(node: &'a proto::NodeProto) -> Self {
        Attrs { node }
    }

    fn get(&self, name: &str) -> Option<&'a proto::AttributeProto> {
        self.node
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }

    /// Whether the attribute is present.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// An integer attribute.
    pub fn int_opt(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|a| a.i)
    }

    /// An integer attribute with a default.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.int_opt(name).unwrap_or(default)
    }

    /// A float attribute.
    pub fn float_opt(&self, name: &str) -> Option<f32> {
        self.get(name).and_then(|a| a.f)
    }

    /// A float attribute with a default.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.float_opt(name).unwrap_or(default)
    }

    /// An integer list attribute.
    pub fn ints_opt(&self, name: &str) -> Option<&'a [i64]> {
        self.get(name).map(|a| a.ints.as_slice())
    }

    /// A float list attribute.
    pub fn floats_opt(&self, name: &str) -> Option<&'a [f32]> {
        self.get(name).map(|a| a.floats.as_slice())
    }

    /// A string attribute (lossy UTF-8).
    pub fn string_opt(&self, name: &str) -> Option<String> {
        self.get(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }

    /// A string attribute with a default.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.string_opt(name).unwrap_or_else(|| default.to_string())
    }

    /// A string list attribute.
    pub fn strings(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|a| {
                a.strings
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A tensor attribute.
    pub fn tensor(&self, name: &str) -> Option<&'a proto::TensorProto> {
        self.get(name).and_then(|a| a.t.as_ref())
    }

    /// Names of all attributes.
    pub fn names(&self) -> Vec<String> {
        self.node
            .attribute
            .iter()
            .filter_map(|a| a.name.clone())
            .collect()
    }
}
