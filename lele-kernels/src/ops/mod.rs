//! Operators, grouped by family. Each operator is a parameter struct that
//! implements [`crate::Kernel`].
