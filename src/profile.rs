//! Per-node timing of a profiled `forward`.
use std::time::{Duration, Instant};

use crate::kernels::rt::Profiler;

/// A [`Profiler`] that adds up the wall time of each node over any number
/// of `forward_profiled` calls.
///
/// ```text
/// let mut timer = lele::NodeTimer::new(Model::node_labels().len());
/// model.forward_profiled(&mut ws, &mut timer, input)?;
/// for row in timer.report(Model::node_labels()) { println!("{row:?}"); }
/// ```
#[derive(Debug, Clone)]
pub struct NodeTimer {
    total: Vec<Duration>,
    /// Each node's arithmetic and bytes moved in its last run.
    work: Vec<Work>,
    /// What the kernels of the node about to finish reported so far.
    pending: Work,
    last: Option<Instant>,
    runs: u32,
}

/// What a node computes in one run: its arithmetic (a multiply-add
/// counting two) and the bytes its kernels read and write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Floating-point (or integer) operations.
    pub flops: u64,
    /// Bytes of the kernels' inputs and outputs.
    pub bytes: u64,
}

/// One node's share of a [`NodeTimer`]'s time.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTime {
    /// Position among the model's node labels.
    pub node: usize,
    /// ONNX op type (or the fused op's name).
    pub op: &'static str,
    /// ONNX node name.
    pub name: &'static str,
    /// Mean time per run.
    pub mean: Duration,
    /// Fraction of the time of all nodes (0..=1).
    pub share: f64,
    /// What the node computes in one run.
    pub work: Work,
}

impl NodeTime {
    /// The row as one JSON object (`op`, `name`, `mean_ms`, `share`,
    /// `flops`, `bytes`), what `lele bench --profile`'s runners print.
    /// Every character outside printable ASCII is a `\uXXXX` escape, so
    /// the line is safe on a terminal whatever the model's names hold.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"op\":{},\"name\":{},\"mean_ms\":{},\"share\":{},\"flops\":{},\"bytes\":{}}}",
            json_string(self.op),
            json_string(self.name),
            json_number(self.mean.as_secs_f64() * 1e3),
            json_number(self.share),
            self.work.flops,
            self.work.bytes
        )
    }

    /// Arithmetic rate (GFLOP/s; `None` for a node without products or
    /// without measurable time).
    pub fn gflops(&self) -> Option<f64> {
        let s = self.mean.as_secs_f64();
        (self.work.flops > 0 && s > 0.0).then(|| self.work.flops as f64 / s / 1e9)
    }

    /// Memory rate of its inputs and outputs (GB/s; `None` without
    /// measurable time or bytes).
    pub fn gbps(&self) -> Option<f64> {
        let s = self.mean.as_secs_f64();
        (self.work.bytes > 0 && s > 0.0).then(|| self.work.bytes as f64 / s / 1e9)
    }
}

impl NodeTimer {
    /// A timer for a model with `nodes` profiled nodes
    /// (`Model::node_labels().len()`). Allocates here, never while timing.
    pub fn new(nodes: usize) -> Self {
        NodeTimer {
            total: vec![Duration::ZERO; nodes],
            work: vec![Work::default(); nodes],
            pending: Work::default(),
            last: None,
            runs: 0,
        }
    }

    /// Number of `forward_profiled` calls timed.
    pub fn runs(&self) -> u32 {
        self.runs
    }

    /// Total time per node, summed over the runs.
    pub fn totals(&self) -> &[Duration] {
        &self.total
    }

    /// Nodes sorted by time, slowest first, with their labels.
    pub fn report(&self, labels: &'static [(&'static str, &'static str)]) -> Vec<NodeTime> {
        let all: Duration = self.total.iter().sum();
        let runs = self.runs.max(1);
        let mut rows: Vec<NodeTime> = self
            .total
            .iter()
            .enumerate()
            .map(|(node, &t)| {
                let (op, name) = labels.get(node).copied().unwrap_or(("?", "?"));
                NodeTime {
                    node,
                    op,
                    name,
                    mean: t / runs,
                    share: if all.is_zero() {
                        0.0
                    } else {
                        t.as_secs_f64() / all.as_secs_f64()
                    },
                    work: self.work.get(node).copied().unwrap_or_default(),
                }
            })
            .collect();
        rows.sort_by(|a, b| b.mean.cmp(&a.mean).then(a.node.cmp(&b.node)));
        rows
    }
}

impl Profiler for NodeTimer {
    fn start(&mut self) {
        self.runs += 1;
        self.pending = Work::default();
        self.last = Some(Instant::now());
    }

    fn node_work(&mut self, flops: u64, bytes: u64) {
        self.pending.flops = self.pending.flops.saturating_add(flops);
        self.pending.bytes = self.pending.bytes.saturating_add(bytes);
    }

    fn node_done(&mut self, node: usize) {
        let now = Instant::now();
        if let (Some(last), Some(slot)) = (self.last, self.total.get_mut(node)) {
            *slot += now - last;
        }
        if let Some(w) = self.work.get_mut(node) {
            *w = self.pending;
        }
        self.pending = Work::default();
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_time_between_marks_to_the_node_just_done() {
        static LABELS: &[(&str, &str)] = &[("Conv", "a"), ("Relu", "b")];
        let mut t = NodeTimer::new(2);
        for _ in 0..2 {
            t.start();
            std::thread::sleep(Duration::from_millis(4));
            t.node_done(0);
            t.node_done(1);
        }
        let r = t.report(LABELS);
        assert_eq!(t.runs(), 2);
        assert_eq!((r[0].op, r[0].name, r[0].node), ("Conv", "a", 0));
        assert!(r[0].mean >= Duration::from_millis(4), "{r:?}");
        assert!(r[1].mean < r[0].mean);
        assert!((r[0].share + r[1].share - 1.0).abs() < 1e-9);
        // An index past the labels is ignored, not a panic.
        t.node_done(7);
    }

    #[test]
    fn work_reported_before_a_node_is_that_nodes() {
        static LABELS: &[(&str, &str)] = &[("MatMul", "a"), ("Relu", "b")];
        let mut t = NodeTimer::new(2);
        t.start();
        t.node_work(1000, 24);
        t.node_work(500, 8);
        std::thread::sleep(Duration::from_millis(2));
        t.node_done(0);
        t.node_work(0, 64);
        t.node_done(1);
        let r = t.report(LABELS);
        let a = r.iter().find(|r| r.name == "a").unwrap();
        let b = r.iter().find(|r| r.name == "b").unwrap();
        assert_eq!(
            a.work,
            Work {
                flops: 1500,
                bytes: 32
            }
        );
        assert_eq!(
            b.work,
            Work {
                flops: 0,
                bytes: 64
            }
        );
        assert!(a.gflops().is_some_and(|g| g > 0.0 && g < 1e-3), "{a:?}");
        assert_eq!(b.gflops(), None);
    }
}

/// `s` as a JSON string literal in printable ASCII.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// A finite number as JSON (JSON has no NaN or infinity: those are 0).
fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "0".into()
    }
}

#[cfg(test)]
mod json_tests {
    use super::*;

    #[test]
    fn json_rows_are_printable_ascii() {
        let row = NodeTime {
            node: 0,
            op: "Conv",
            name: "a\"b\\c\u{1b}[2J\u{202e}\u{1F600}",
            mean: Duration::from_micros(1500),
            share: 0.25,
            work: Work { flops: 7, bytes: 9 },
        };
        let json = row.to_json();
        assert!(json.bytes().all(|b| (b' '..=b'~').contains(&b)), "{json}");
        assert_eq!(
            json,
            "{\"op\":\"Conv\",\"name\":\"a\\\"b\\\\c\\u001b[2J\\u202e\\ud83d\\ude00\",\
             \"mean_ms\":1.5,\"share\":0.25,\"flops\":7,\"bytes\":9}"
        );
    }
}
