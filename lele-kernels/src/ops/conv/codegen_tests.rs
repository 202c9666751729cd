//! The convolution attributes printed as Rust, as generated code rebuilds them.
use super::*;
use crate::codegen::ToRust;
use alloc::string::ToString;

#[test]
fn params_print_as_rust() {
    let op = ConvTranspose {
        group: 2,
        kernel: [3, 3],
        strides: [2, 2],
        pads: [1, 1, 1, 1],
        dilations: [1, 1],
        output_padding: [1, 0],
        output_shape: Some([8, 9]),
        auto_pad: AutoPad::SameLower,
        activation: Activation::Relu,
    };
    let s = op.to_rust().to_string().replace(' ', "");
    assert!(
        s.starts_with("::lele::kernels::ops::conv::ConvTranspose{group:2usize"),
        "{s}"
    );
    assert!(
        s.contains("auto_pad:::lele::kernels::ops::conv::AutoPad::SameLower"),
        "{s}"
    );
    assert!(
        s.contains("output_shape:::core::option::Option::Some([8usize,9usize])"),
        "{s}"
    );
    assert!(
        s.contains("activation:::lele::kernels::ops::unary::Activation::Relu"),
        "{s}"
    );
    let r = crate::ops::resize::CoordMode::TfCropAndResize
        .to_rust()
        .to_string()
        .replace(' ', "");
    assert_eq!(
        r,
        "::lele::kernels::ops::resize::CoordMode::TfCropAndResize"
    );
}
