//! Macros binding a Rust element type to a tensor's dtype.

/// Matches a dtype against a list of `DType => type` arms, binding the Rust
/// type to `$T` inside `$body`; other dtypes are `UnsupportedDType`.
macro_rules! dispatch {
    ($dt:expr, $op:expr, [$($d:ident => $t:ty),* $(,)?], |$T:ident| $body:expr) => {
        match $dt {
            $($crate::dtype::DType::$d => {
                #[allow(dead_code)]
                type $T = $t;
                $body
            })*
            #[allow(unreachable_patterns)]
            dt => Err($crate::error::KernelError::UnsupportedDType { op: $op, dtype: dt }),
        }
    };
}
pub(crate) use dispatch;

/// [`dispatch!`] over every numeric dtype (not Bool).
macro_rules! dispatch_num {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        $crate::ops::dtype_dispatch::dispatch!($dt, $op, [
            F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16,
            I8 => i8, U8 => u8, I16 => i16, U16 => u16,
            I32 => i32, U32 => u32, I64 => i64, U64 => u64,
        ], |$T| $body)
    };
}
pub(crate) use dispatch_num;

/// [`dispatch!`] over the element sizes 1, 2, 4 and 8 (data movement).
macro_rules! dispatch_size {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        match $dt.size() {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            8 => {
                type $T = u64;
                $body
            }
            _ => Err($crate::error::KernelError::UnsupportedDType {
                op: $op,
                dtype: $dt,
            }),
        }
    };
}
pub(crate) use dispatch_size;
