//! The compiler's intermediate representation: an owned graph whose nodes
//! carry typed kernel parameters.
mod tensor;

use std::fmt;
use std::sync::Arc;

use lele_kernels::codegen::ToRust;
use lele_kernels::{DType, Kernel};

pub use tensor::Tensor;

/// A kernel with its parameters, printable as Rust (and, through `Any`,
/// recognizable by the fusion passes).
pub trait OpKernel: Kernel + ToRust + fmt::Debug + Send + Sync + std::any::Any {}
impl<T: Kernel + ToRust + fmt::Debug + Send + Sync + std::any::Any> OpKernel for T {}

/// Index of a value in [`Graph::values`].
pub type ValueId = usize;

/// A dimension as declared in the ONNX file.
#[derive(Clone, Debug, PartialEq)]
pub enum DeclaredDim {
    /// A fixed size.
    Fixed(usize),
    /// A named or anonymous dynamic dimension.
    Dynamic(String),
}

/// A tensor value: graph input, constant, or node output.
#[derive(Clone, Debug)]
pub struct Value {
    /// ONNX name (unique inside the graph after loading).
    pub name: String,
    /// Element type, once known.
    pub dtype: Option<DType>,
    /// Declared dims (graph inputs and outputs), if any.
    pub declared: Option<Vec<DeclaredDim>>,
    /// Constant data (initializers, Constant nodes, folded values).
    pub constant: Option<Arc<Tensor>>,
}

/// A node's operation.
pub enum Op {
    /// A kernel from lele-kernels with its parameters.
    Kernel(Box<dyn OpKernel>),
    /// A view: same bytes as input 0, new shape (Reshape, Squeeze, …).
    View(Box<dyn OpKernel>),
    /// Conditional execution of one of two blocks.
    If {
        /// Executed when the condition is true.
        then_branch: Block,
        /// Executed otherwise.
        else_branch: Block,
    },
    /// An operator the compiler cannot handle (reported, never emitted).
    Unsupported {
        /// Why.
        reason: String,
    },
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Kernel(k) => write!(f, "Kernel({k:?})"),
            Op::View(k) => write!(f, "View({k:?})"),
            Op::If { .. } => write!(f, "If"),
            Op::Unsupported { reason } => write!(f, "Unsupported({reason})"),
        }
    }
}

/// One operator application.
#[derive(Debug)]
pub struct Node {
    /// ONNX node name (may be empty in the file; then synthesized).
    pub name: String,
    /// ONNX op type.
    pub op_type: String,
    /// ONNX domain ("" for the default domain).
    pub domain: String,
    /// The operation.
    pub op: Op,
    /// Inputs in ONNX order; `None` for omitted optional inputs.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs in ONNX order.
    pub outputs: Vec<ValueId>,
    /// How each output's dtype follows from the inputs.
    pub out_dtypes: Vec<OutDType>,
}

/// The dtype rule of one node output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OutDType {
    /// Same dtype as input `i`.
    Input(usize),
    /// Always this dtype.
    Fixed(DType),
}

/// A list of nodes in execution order, with the values it yields (for
/// subgraphs).
#[derive(Debug, Default)]
pub struct Block {
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// Values produced for the enclosing node (If branches).
    pub outputs: Vec<ValueId>,
}

/// A whole model.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every value of the main graph and of nested subgraphs.
    pub values: Vec<Value>,
    /// The main block.
    pub main: Block,
    /// Model inputs that are not initializers, in ONNX order.
    pub inputs: Vec<ValueId>,
    /// Model outputs in ONNX order.
    pub outputs: Vec<ValueId>,
    /// Default-domain opset version.
    pub opset: i64,
    /// `metadata_props` of the model.
    pub metadata: Vec<(String, String)>,
    /// Producer name and version, for `lele inspect`.
    pub producer: String,
    /// Outputs of pre-opset-13 Softmax nodes with a non-default axis, to be
    /// checked once ranks are known.
    pub legacy_softmax: Vec<(ValueId, i64)>,
    /// Values kept from one call to the next (a decoder's key/value
    /// caches, outputs of the node that updates them): the planner gives
    /// each an arena region of its own, live for the whole run, so the
    /// next call finds them as this one left them.
    pub persistent: Vec<ValueId>,
}

impl Graph {
    /// Adds a value and returns its id.
    pub fn add_value(&mut self, name: &str, dtype: Option<DType>) -> ValueId {
        self.values.push(Value {
            name: name.to_string(),
            dtype,
            declared: None,
            constant: None,
        });
        self.values.len() - 1
    }

    /// Adds a constant value.
    pub fn add_constant(&mut self, name: &str, t: Tensor) -> ValueId {
        let id = self.add_value(name, Some(t.dtype));
        self.values[id].constant = Some(Arc::new(t));
        id
    }

    /// Visits every node, nested blocks included (pre-order).
    pub fn for_each_node(&self, f: &mut dyn FnMut(&Node)) {
        fn walk(b: &Block, f: &mut dyn FnMut(&Node)) {
            for n in &b.nodes {
                f(n);
                if let Op::If {
                    then_branch,
                    else_branch,
                } = &n.op
                {
                    walk(then_branch, f);
                    walk(else_branch, f);
                }
            }
        }
        walk(&self.main, f);
    }
}
