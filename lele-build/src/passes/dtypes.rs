//! Dtype inference: every value gets its element type from its producer.
use crate::error::{BuildError, Result};
use crate::ir::{Block, Graph, Op, OutDType};

/// Fills `dtype` of every node output (nested blocks included).
pub fn infer_dtypes(g: &mut Graph) -> Result<()> {
    let mut main = std::mem::take(&mut g.main);
    let r = block(g, &mut main);
    g.main = main;
    r
}

fn block(g: &mut Graph, b: &mut Block) -> Result<()> {
    for n in &mut b.nodes {
        if let Op::If {
            then_branch,
            else_branch,
        } = &mut n.op
        {
            block(g, then_branch)?;
            block(g, else_branch)?;
            for (i, &o) in n.outputs.iter().enumerate() {
                let t = then_branch.outputs.get(i).and_then(|&v| g.values[v].dtype);
                let e = else_branch.outputs.get(i).and_then(|&v| g.values[v].dtype);
                // Both branches write the same output: with different
                // element types one of them would be read as the other.
                if let (Some(t), Some(e)) = (t, e)
                    && t != e
                {
                    return Err(BuildError::Node {
                        node: n.name.clone(),
                        op: n.op_type.clone(),
                        msg: format!(
                            "output {i} (`{}`) is {} in then_branch but {} in else_branch",
                            g.values[o].name,
                            t.name(),
                            e.name()
                        ),
                    });
                }
                g.values[o].dtype = t.or(e);
            }
            continue;
        }
        if matches!(n.op, Op::Unsupported { .. }) {
            continue;
        }
        for (i, &o) in n.outputs.iter().enumerate() {
            let rule = n.out_dtypes.get(i).copied().unwrap_or(OutDType::Input(0));
            let dt = match rule {
                OutDType::Fixed(d) => Some(d),
                OutDType::Input(k) => n
                    .inputs
                    .get(k)
                    .copied()
                    .flatten()
                    .and_then(|v| g.values[v].dtype),
            };
            match dt {
                Some(d) => g.values[o].dtype = Some(d),
                None => {
                    return Err(BuildError::Node {
                        node: n.name.clone(),
                        op: n.op_type.clone(),
                        msg: "cannot infer the output dtype".into(),
                    });
                }
            }
        }
    }
    Ok(())
}
