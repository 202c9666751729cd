//! User extensions of the compiler, for `build.rs` users of
//! [`crate::Compiler`]: op overrides (lower an ONNX op — possibly one lele
//! does not know — to the user's own kernel) and patterns (replace a
//! matched group of nodes by one user kernel).
//!
//! A replacement has two halves: a build-time kernel, which the compiler
//! runs for shape inference, sizing and constant folding, and the tokens of
//! an expression of the same kernel in the user's crate, which the generated
//! code calls. Both are normally the same type, compiled into `build.rs`
//! (e.g. with `#[path]`) and into the crate.
use std::collections::{HashMap, HashSet};
use std::fmt;

use lele_kernels::codegen::ToRust;
use lele_kernels::{Kernel, KernelError, Shape, TensorMut, TensorRef};
use proc_macro2::TokenStream;

use crate::error::{BuildError, Result};
use crate::ir::{Graph, Node, Op, OutDType, Tensor, ValueId};
use crate::ops::Attrs;

/// What an override or a pattern puts in place of the original nodes.
pub struct Replacement {
    kernel: Box<dyn Kernel + Send + Sync>,
    tokens: String,
    dtypes: Vec<OutDType>,
}

impl Replacement {
    /// `kernel` is used at build time; `tokens` is an expression of a value
    /// implementing `lele::kernels::Kernel` in the generated code (for
    /// example `quote!(crate::kernels::Swish { beta: 1.0 })`); `dtypes` gives
    /// each output's dtype rule.
    pub fn new<K: Kernel + Send + Sync + 'static>(
        kernel: K,
        tokens: TokenStream,
        dtypes: Vec<OutDType>,
    ) -> Replacement {
        Replacement {
            kernel: Box::new(kernel),
            tokens: tokens.to_string(),
            dtypes,
        }
    }
}

/// Whether `k` is a user's kernel (an override or a pattern's
/// replacement), which the generated code may not assume to be `Sync`.
pub(crate) fn is_user_kernel(k: &dyn crate::ops::OpKernel) -> bool {
    let any: &dyn std::any::Any = k;
    any.downcast_ref::<Custom>().is_some()
}

/// A user kernel inside the IR.
struct Custom {
    label: String,
    kernel: Box<dyn Kernel + Send + Sync>,
    tokens: String,
}

impl fmt::Debug for Custom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Custom({}: {})", self.label, self.tokens)
    }
}

impl Kernel for Custom {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        self.kernel.infer(inputs, outputs)
    }
    fn elementwise(&self) -> bool {
        self.kernel.elementwise()
    }
    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        self.kernel.scratch_bytes(inputs, outputs)
    }
    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        self.kernel.run(inputs, outputs, scratch)
    }
}

impl ToRust for Custom {
    fn to_rust(&self) -> TokenStream {
        // Checked to parse when the replacement is installed.
        self.tokens.parse().unwrap_or_default()
    }
}

fn install(label: &str, r: Replacement) -> Result<(Op, Vec<OutDType>)> {
    if r.tokens.parse::<TokenStream>().is_err() || r.tokens.trim().is_empty() {
        return Err(BuildError::Other(format!(
            "{label}: the replacement's tokens are not a Rust expression"
        )));
    }
    Ok((
        Op::Kernel(Box::new(Custom {
            label: label.to_string(),
            kernel: r.kernel,
            tokens: r.tokens,
        })),
        r.dtypes,
    ))
}

/// What an override sees of the ONNX node it replaces.
pub struct NodeInfo<'a> {
    /// Op type.
    pub op_type: &'a str,
    /// Domain (`""` for the default domain).
    pub domain: &'a str,
    /// Node name.
    pub name: &'a str,
    /// Attributes.
    pub attrs: Attrs<'a>,
    /// Number of inputs (omitted optional ones included).
    pub n_inputs: usize,
    /// Number of outputs.
    pub n_outputs: usize,
}

/// Lowers a node to a user kernel; `Err` makes the node unsupported with
/// that reason.
pub type OverrideFn = Box<dyn Fn(&NodeInfo<'_>) -> std::result::Result<Replacement, String>>;

/// A group of nodes of the main graph found by a matcher.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternMatch {
    /// Indices (in [`GraphView::nodes`]) of the matched nodes.
    pub nodes: Vec<usize>,
    /// Inputs of the fused node.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs of the fused node (values produced by matched nodes).
    pub outputs: Vec<ValueId>,
}

/// Read access to the main graph for matchers and generators.
pub struct GraphView<'a> {
    graph: &'a Graph,
    producer: HashMap<ValueId, usize>,
    uses: HashMap<ValueId, usize>,
}

impl<'a> GraphView<'a> {
    fn new(graph: &'a Graph) -> GraphView<'a> {
        let mut producer = HashMap::new();
        let mut uses: HashMap<ValueId, usize> = HashMap::new();
        for (i, n) in graph.main.nodes.iter().enumerate() {
            for &o in &n.outputs {
                producer.insert(o, i);
            }
        }
        graph.for_each_node(&mut |n| {
            for v in n.inputs.iter().flatten() {
                *uses.entry(*v).or_default() += 1;
            }
        });
        for v in &graph.outputs {
            *uses.entry(*v).or_default() += 1;
        }
        GraphView {
            graph,
            producer,
            uses,
        }
    }

    /// Nodes of the main graph in execution order.
    pub fn nodes(&self) -> &'a [Node] {
        &self.graph.main.nodes
    }

    /// Index of the node producing `v`.
    pub fn producer(&self, v: ValueId) -> Option<usize> {
        self.producer.get(&v).copied()
    }

    /// How many node inputs (and model outputs) read `v`.
    pub fn uses(&self, v: ValueId) -> usize {
        self.uses.get(&v).copied().unwrap_or(0)
    }

    /// The constant value of `v`, if it is one.
    pub fn constant(&self, v: ValueId) -> Option<&'a Tensor> {
        self.graph.values[v].constant.as_deref()
    }

    /// The ONNX name of `v`.
    pub fn name(&self, v: ValueId) -> &'a str {
        &self.graph.values[v].name
    }
}

/// Finds a group anchored at node `i` (usually its last node).
pub type Matcher = Box<dyn Fn(&GraphView<'_>, usize) -> Option<PatternMatch>>;
/// Builds the fused node for a match.
pub type Generator =
    Box<dyn Fn(&GraphView<'_>, &PatternMatch) -> std::result::Result<Replacement, String>>;

struct Pattern {
    name: String,
    matcher: Matcher,
    generator: Generator,
}

/// Overrides and patterns.
#[derive(Default)]
pub struct Extensions {
    overrides: Vec<(String, OverrideFn)>,
    patterns: Vec<Pattern>,
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field(
                "overrides",
                &self.overrides.iter().map(|o| &o.0).collect::<Vec<_>>(),
            )
            .field(
                "patterns",
                &self.patterns.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Extensions {
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.overrides.is_empty() && self.patterns.is_empty()
    }

    /// Adds an override of `op` (`"Relu"` or `"com.example.Swish"`).
    pub fn add_override(&mut self, op: &str, f: OverrideFn) {
        self.overrides.push((op.to_string(), f));
    }

    /// Adds a pattern.
    pub fn add_pattern(&mut self, name: &str, matcher: Matcher, generator: Generator) {
        self.patterns.push(Pattern {
            name: name.to_string(),
            matcher,
            generator,
        });
    }

    /// Whether an override is registered for `qualified` (`"Relu"`,
    /// `"com.example.Swish"`).
    pub(crate) fn overrides(&self, qualified: &str) -> bool {
        self.overrides.iter().any(|(op, _)| op == qualified)
    }

    /// Lowers a node through an override, if one is registered for it.
    pub(crate) fn lower(&self, info: &NodeInfo<'_>) -> Option<(Op, Vec<OutDType>)> {
        let qualified = qualified_op(info.domain, info.op_type);
        let (_, f) = self.overrides.iter().find(|(op, _)| *op == qualified)?;
        let label = format!("override of {qualified} (node `{}`)", info.name);
        Some(
            match f(info)
                .map_err(BuildError::Other)
                .and_then(|r| install(&label, r))
            {
                Ok(x) => x,
                Err(e) => (
                    Op::Unsupported {
                        reason: e.to_string(),
                    },
                    vec![OutDType::Input(0); info.n_outputs],
                ),
            },
        )
    }

    /// Applies every pattern to the main graph until none matches.
    pub(crate) fn apply_patterns(&self, g: &mut Graph) -> Result<usize> {
        let mut fused = 0;
        for p in &self.patterns {
            let mut i = 0;
            while i < g.main.nodes.len() {
                let (m, replacement) = {
                    let view = GraphView::new(g);
                    match (p.matcher)(&view, i) {
                        Some(m) if valid_match(&view, &m) => {
                            let r = (p.generator)(&view, &m).map_err(|e| {
                                BuildError::Other(format!("pattern `{}`: {e}", p.name))
                            })?;
                            (m, r)
                        }
                        _ => {
                            i += 1;
                            continue;
                        }
                    }
                };
                let (op, out_dtypes) = install(&format!("pattern `{}`", p.name), replacement)?;
                let last = *m.nodes.iter().max().unwrap_or(&i);
                let name = format!("{}::{}", p.name, g.main.nodes[last].name);
                g.main.nodes[last] = Node {
                    name,
                    op_type: p.name.clone(),
                    domain: "lele.pattern".into(),
                    op,
                    inputs: m.inputs.clone(),
                    outputs: m.outputs.clone(),
                    out_dtypes,
                };
                let mut drop: Vec<usize> = m.nodes.iter().copied().filter(|&k| k != last).collect();
                drop.sort_unstable();
                drop.dedup();
                for k in drop.iter().rev() {
                    g.main.nodes.remove(*k);
                }
                fused += 1;
                i = last + 1 - drop.len();
            }
        }
        Ok(fused)
    }
}

/// A match may only hide values nobody else reads, and its inputs must
/// come from outside the group.
fn valid_match(view: &GraphView<'_>, m: &PatternMatch) -> bool {
    let nodes = view.nodes();
    if m.nodes.is_empty() || m.nodes.iter().any(|&k| k >= nodes.len()) || m.outputs.is_empty() {
        return false;
    }
    let set: HashSet<usize> = m.nodes.iter().copied().collect();
    let produced: HashSet<ValueId> = m
        .nodes
        .iter()
        .flat_map(|&k| nodes[k].outputs.iter().copied())
        .collect();
    if !m.outputs.iter().all(|o| produced.contains(o)) {
        return false;
    }
    if m.inputs.iter().flatten().any(|v| produced.contains(v)) {
        return false;
    }
    // The fused node runs where the last matched node ran: no other node
    // between the first and the last may read what the group produces.
    let first = m.nodes.iter().copied().min().unwrap_or(0);
    let last = m.nodes.iter().copied().max().unwrap_or(0);
    for (k, n) in nodes.iter().enumerate().take(last).skip(first) {
        if !set.contains(&k) && n.inputs.iter().flatten().any(|v| produced.contains(v)) {
            return false;
        }
    }
    // Reads of hidden values from inside the group.
    let mut inner_reads: HashMap<ValueId, usize> = HashMap::new();
    for &k in &set {
        for v in nodes[k].inputs.iter().flatten() {
            *inner_reads.entry(*v).or_default() += 1;
        }
    }
    produced
        .iter()
        .filter(|v| !m.outputs.contains(v))
        .all(|v| view.uses(*v) == inner_reads.get(v).copied().unwrap_or(0))
}

/// How extensions and errors name an operator: `op` in the default domain
/// (`""` or `ai.onnx`), else `domain.op`.
pub(crate) fn qualified_op(domain: &str, op: &str) -> String {
    if domain.is_empty() || domain == "ai.onnx" {
        op.to_string()
    } else {
        format!("{domain}.{op}")
    }
}
