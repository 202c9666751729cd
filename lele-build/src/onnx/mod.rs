//! Reading ONNX files into the IR: the graph, its nodes lowered to kernels
//! (`crate::ops`), ONNX Runtime's contrib operators rewritten into
//! standard ones, subgraphs and constants. The file format itself
//! (protobuf types, limits, tensors) is [`crate::onnx_file`].
mod contrib;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lele_kernels::DType;

use crate::error::{BuildError, Result};
use crate::extend::Extensions;
use crate::ir::{Block, DeclaredDim, Graph, Node, Op, ValueId};

pub use crate::onnx_file::{
    Limits, decode_model_proto, proto, read_model_proto, tensor_from_proto, wire,
};

/// Loads an ONNX file into the IR.
pub fn load(path: &Path) -> Result<Graph> {
    let limits = Limits::default();
    let model = read_model_proto(path, &limits)?;
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    from_proto(&model, &dir, &limits)
}

/// Builds the IR from a decoded model; external data is read from `dir`.
pub fn from_proto(model: &proto::ModelProto, dir: &Path, limits: &Limits) -> Result<Graph> {
    from_proto_with(model, dir, limits, &Extensions::default())
}

/// [`from_proto`] with user op overrides.
pub fn from_proto_with(
    model: &proto::ModelProto,
    dir: &Path,
    limits: &Limits,
    ext: &Extensions,
) -> Result<Graph> {
    let opset = model
        .opset_import
        .iter()
        .find(|o| {
            o.domain.as_deref().unwrap_or("").is_empty() || o.domain.as_deref() == Some("ai.onnx")
        })
        .and_then(|o| o.version)
        .unwrap_or(1);
    let graph_proto = model
        .graph
        .as_ref()
        .ok_or_else(|| BuildError::Decode("the model has no graph".into()))?;
    let mut g = Graph {
        opset,
        producer: format!(
            "{} {}",
            model.producer_name.as_deref().unwrap_or(""),
            model.producer_version.as_deref().unwrap_or("")
        )
        .trim()
        .to_string(),
        metadata: model
            .metadata_props
            .iter()
            .map(|p| {
                (
                    p.key.clone().unwrap_or_default(),
                    p.value.clone().unwrap_or_default(),
                )
            })
            .collect(),
        ..Graph::default()
    };
    let mut loader = Loader {
        ext,
        dir: dir.to_path_buf(),
        limits: limits.clone(),
        scopes: vec![HashMap::new()],
        node_count: 0,
    };
    // Initializers first, then inputs that are not initializers.
    for init in &graph_proto.initializer {
        let t = tensor_from_proto(init, &loader.dir, limits)?;
        let name = init.name.clone().unwrap_or_default();
        let id = g.add_constant(&name, t);
        loader.bind(&name, id);
    }
    for input in &graph_proto.input {
        let name = input.name.clone().unwrap_or_default();
        if loader.lookup(&name).is_some() {
            continue;
        }
        let (dtype, dims) = value_type(input);
        let id = g.add_value(&name, dtype);
        g.values[id].declared = dims;
        loader.bind(&name, id);
        g.inputs.push(id);
    }
    g.main = loader.block(&mut g, graph_proto, 0)?;
    for out in &graph_proto.output {
        let name = out.name.clone().unwrap_or_default();
        let id = loader.lookup(&name).ok_or_else(|| {
            BuildError::Decode(format!("graph output `{name}` is never produced"))
        })?;
        let (dtype, dims) = value_type(out);
        if g.values[id].dtype.is_none() {
            g.values[id].dtype = dtype;
        }
        if g.values[id].declared.is_none() {
            g.values[id].declared = dims;
        }
        g.outputs.push(id);
    }
    Ok(g)
}

fn value_type(v: &proto::ValueInfoProto) -> (Option<DType>, Option<Vec<DeclaredDim>>) {
    use proto::type_proto::Value;
    let Some(Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return (None, None);
    };
    let dtype = t.elem_type.and_then(DType::from_onnx_code);
    let dims = t.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(proto::tensor_shape_proto::dimension::Value::DimValue(n)) if *n > 0 => {
                    DeclaredDim::Fixed(*n as usize)
                }
                Some(proto::tensor_shape_proto::dimension::Value::DimParam(p)) => {
                    DeclaredDim::Dynamic(p.clone())
                }
                _ => DeclaredDim::Dynamic(String::new()),
            })
            .collect()
    });
    (dtype, dims)
}

struct Loader<'e> {
    ext: &'e Extensions,
    dir: PathBuf,
    limits: Limits,
    scopes: Vec<HashMap<String, ValueId>>,
    node_count: usize,
}

impl Loader<'_> {
    fn bind(&mut self, name: &str, id: ValueId) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), id);
        }
    }

    fn lookup(&self, name: &str) -> Option<ValueId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// The nodes of `gp` with ORT's contrib operators rewritten into
    /// standard ones ([`contrib`]; not those an extension overrides), and
    /// why, by node name, those that could not be.
    fn expand_contrib<'g>(
        &self,
        g: &Graph,
        gp: &'g proto::GraphProto,
        depth: usize,
    ) -> (
        std::borrow::Cow<'g, [proto::NodeProto]>,
        HashMap<String, String>,
    ) {
        let mut errors = HashMap::new();
        let wanted = |np: &proto::NodeProto| {
            let (domain, op) = (
                np.domain.as_deref().unwrap_or(""),
                np.op_type.as_deref().unwrap_or(""),
            );
            contrib::is_contrib(domain, op)
                && !self.ext.overrides(&crate::extend::qualified_op(domain, op))
        };
        if !gp.node.iter().any(wanted) {
            return (std::borrow::Cow::Borrowed(&gp.node), errors);
        }
        // Ranks the file declares, and those of the values the standard
        // nodes before a contrib node compute from them (a rewrite may
        // depend on an operand's rank: a mask's form, a transpose).
        let seen = std::cell::RefCell::new(contrib::Seen::default());
        let constant = |v: &str| g.values[self.lookup(v)?].constant.clone();
        let rank = |v: &str| {
            if let Some(r) = seen.borrow().rank(v) {
                return Some(r);
            }
            let value = &g.values[self.lookup(v)?];
            match (&value.declared, &value.constant) {
                (Some(d), _) => Some(d.len()),
                (None, Some(c)) => Some(c.dims.len()),
                _ => None,
            }
        };
        let numel = |v: &str| {
            let known = seen.borrow().numel(v);
            known.or_else(|| constant(v).map(|t| t.numel()))
        };
        let record = |np: &proto::NodeProto| {
            let r = contrib::output_rank(np, &rank, &numel);
            seen.borrow_mut().record(np, r);
        };
        let mut nodes = Vec::with_capacity(gp.node.len());
        for (i, np) in gp.node.iter().enumerate() {
            if !wanted(np) {
                record(np);
                nodes.push(np.clone());
                continue;
            }
            let op_type = np.op_type.as_deref().unwrap_or("");
            let name = match np.name.as_deref() {
                Some(n) if !n.is_empty() => n.to_string(),
                _ => format!("{op_type}_{depth}_{i}"),
            };
            let known = contrib::Known {
                rank: &rank,
                constant: &constant,
            };
            match contrib::expand(np, &name, g.opset, &known) {
                Ok(expanded) => {
                    for n in &expanded {
                        record(n);
                    }
                    nodes.extend(expanded)
                }
                Err(reason) => {
                    let mut kept = np.clone();
                    kept.name = Some(name.clone());
                    errors.insert(name, reason);
                    nodes.push(kept);
                }
            }
        }
        (std::borrow::Cow::Owned(nodes), errors)
    }

    fn block(&mut self, g: &mut Graph, gp: &proto::GraphProto, depth: usize) -> Result<Block> {
        if depth > self.limits.max_depth {
            return Err(BuildError::Limit("subgraphs nested too deeply".into()));
        }
        let mut block = Block::default();
        let (nodes, contrib_errors) = self.expand_contrib(g, gp, depth);
        for (i, np) in nodes.iter().enumerate() {
            self.node_count += 1;
            if self.node_count > self.limits.max_nodes {
                return Err(BuildError::Limit(format!(
                    "more than {} nodes",
                    self.limits.max_nodes
                )));
            }
            let op_type = np.op_type.clone().unwrap_or_default();
            let domain = np.domain.clone().unwrap_or_default();
            let name = match np.name.as_deref() {
                Some(n) if !n.is_empty() => n.to_string(),
                _ => format!("{op_type}_{depth}_{i}"),
            };
            let mut inputs = Vec::with_capacity(np.input.len());
            for inp in &np.input {
                if inp.is_empty() {
                    inputs.push(None);
                } else {
                    let id = self.lookup(inp).ok_or_else(|| {
                        BuildError::Decode(format!(
                            "node `{name}` reads `{inp}`, which is never defined before it"
                        ))
                    })?;
                    inputs.push(Some(id));
                }
            }
            // Constant nodes become constant values directly.
            if op_type == "Constant" && domain.is_empty() {
                let t = crate::ops::constant_value(np, &self.dir, &self.limits).map_err(|msg| {
                    BuildError::Node {
                        node: name.clone(),
                        op: op_type.clone(),
                        msg,
                    }
                })?;
                let out = np.output.first().cloned().unwrap_or_default();
                let id = g.add_constant(&out, t);
                self.bind(&out, id);
                continue;
            }
            let mut outputs = Vec::with_capacity(np.output.len());
            let mut out_names = Vec::new();
            for o in &np.output {
                // Optional outputs may be omitted with an empty name.
                let id = g.add_value(if o.is_empty() { "" } else { o }, None);
                outputs.push(id);
                out_names.push(o.clone());
            }
            if needs_constant_weights(&op_type, &domain, &inputs, g) {
                // Lowering a convolution needs its kernel size: weights
                // computed from initializers (a resampler's windowed sinc)
                // are folded into a constant first.
                crate::passes::fold::fold_block(g, &mut block, None)?;
            }
            let (op, out_dtypes) = if op_type == "If" && domain.is_empty() {
                (self.if_op(g, np, depth)?, Vec::new())
            } else {
                let info = crate::extend::NodeInfo {
                    op_type: &op_type,
                    domain: &domain,
                    name: &name,
                    attrs: crate::ops::Attrs::new(np),
                    n_inputs: inputs.len(),
                    n_outputs: outputs.len(),
                };
                let overridden = self.ext.lower(&info);
                let opset = g_opset(g);
                let mut ctx = crate::ops::LowerCtx {
                    graph: g,
                    node: np,
                    name: &name,
                    opset,
                    inputs: &mut inputs,
                    outputs: &outputs,
                };
                match overridden {
                    Some(o) => o,
                    None if contrib_errors.contains_key(&name) => (
                        Op::Unsupported {
                            reason: contrib_errors[&name].clone(),
                        },
                        vec![crate::ir::OutDType::Fixed(DType::F32); outputs.len()],
                    ),
                    None => {
                        let l = crate::ops::lower(&mut ctx);
                        (l.op, l.dtypes)
                    }
                }
            };
            for (o, id) in out_names.iter().zip(&outputs) {
                if !o.is_empty() {
                    self.bind(o, *id);
                }
            }
            block.nodes.push(Node {
                name,
                op_type,
                domain,
                op,
                inputs,
                outputs,
                out_dtypes,
            });
        }
        Ok(block)
    }

    fn if_op(&mut self, g: &mut Graph, np: &proto::NodeProto, depth: usize) -> Result<Op> {
        let mut then_branch = None;
        let mut else_branch = None;
        for a in &np.attribute {
            let Some(sub) = a.g.as_ref() else { continue };
            match a.name.as_deref() {
                Some("then_branch") => then_branch = Some(self.subgraph(g, sub, depth + 1)?),
                Some("else_branch") => else_branch = Some(self.subgraph(g, sub, depth + 1)?),
                _ => {}
            }
        }
        match (then_branch, else_branch) {
            (Some(then_branch), Some(else_branch)) => Ok(Op::If {
                then_branch,
                else_branch,
            }),
            _ => Err(BuildError::Decode("If without both branches".into())),
        }
    }

    fn subgraph(&mut self, g: &mut Graph, sub: &proto::GraphProto, depth: usize) -> Result<Block> {
        self.scopes.push(HashMap::new());
        for init in &sub.initializer {
            let t = tensor_from_proto(init, &self.dir, &self.limits)?;
            let name = init.name.clone().unwrap_or_default();
            let id = g.add_constant(&name, t);
            self.bind(&name, id);
        }
        let mut block = self.block(g, sub, depth)?;
        for out in &sub.output {
            let name = out.name.clone().unwrap_or_default();
            let id = self.lookup(&name).ok_or_else(|| {
                BuildError::Decode(format!("subgraph output `{name}` is never produced"))
            })?;
            block.outputs.push(id);
        }
        self.scopes.pop();
        Ok(block)
    }
}

fn g_opset(g: &Graph) -> i64 {
    g.opset
}

/// Whether `op_type` is a convolution whose weights (input 1) are computed
/// by earlier nodes rather than given as a constant.
fn needs_constant_weights(
    op_type: &str,
    domain: &str,
    inputs: &[Option<crate::ir::ValueId>],
    g: &Graph,
) -> bool {
    matches!(op_type, "Conv" | "ConvTranspose" | "ConvInteger")
        && domain.is_empty()
        && inputs
            .get(1)
            .copied()
            .flatten()
            .is_some_and(|w| g.values[w].constant.is_none() && g.values[w].declared.is_none())
}
