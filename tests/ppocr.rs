//! PP-OCR det/rec/cls (v4 and v6 small) through the macro against ONNX
//! Runtime, at several input sizes from one build each.
mod common;

use common::{assert_close, load, view};

#[lele::model("tests/models/ppocr_v4_det.toml")]
struct OcrV4Det;

#[lele::model("tests/models/ppocr_v4_rec.toml")]
struct OcrV4Rec;

#[lele::model("tests/models/ppocr_cls.toml")]
struct OcrCls;

#[lele::model("tests/models/ppocr_v6_det.toml")]
struct OcrV6Det;

#[lele::model("tests/models/ppocr_v6_rec.toml")]
struct OcrV6Rec;

macro_rules! single_input_case {
    ($test:ident, $model:ident, $case:literal, $field:ident) => {
        #[test]
        fn $test() {
            let model = $model::new().unwrap();
            let mut ws = model.workspace();
            let x = load($case, 0, "in", 0);
            let out = model.forward(&mut ws, view(&x)).unwrap();
            assert_close($case, out.$field.as_untyped(), &load($case, 0, "out", 0));
        }
    };
}

single_input_case!(
    v4_det_320x480_matches_ort,
    OcrV4Det,
    "ppocr_v4_det_320x480",
    sigmoid_0_tmp_0
);
single_input_case!(
    v4_det_640x640_matches_ort,
    OcrV4Det,
    "ppocr_v4_det_640x640",
    sigmoid_0_tmp_0
);
single_input_case!(
    v4_rec_48x320_matches_ort,
    OcrV4Rec,
    "ppocr_v4_rec_48x320",
    softmax_11_tmp_0
);
single_input_case!(
    v4_rec_48x160_matches_ort,
    OcrV4Rec,
    "ppocr_v4_rec_48x160",
    softmax_11_tmp_0
);
single_input_case!(
    cls_48x192_matches_ort,
    OcrCls,
    "ppocr_cls_48x192",
    save_infer_model_scale_0_tmp_1
);
single_input_case!(
    v6_det_480x480_matches_ort,
    OcrV6Det,
    "ppocr_v6_det_480x480",
    fetch_name_0
);
single_input_case!(
    v6_rec_48x320_matches_ort,
    OcrV6Rec,
    "ppocr_v6_rec_48x320",
    fetch_name_0
);
