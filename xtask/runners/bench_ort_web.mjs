// onnxruntime-web's wasm backend (one thread, SIMD) timed in node, speaking
// the runners' protocol of `cargo xtask bench` (see xtask/src/bench.rs):
//   node bench_ort_web.mjs --ort DIR --model M --input NAME=FILE.npy ...
//        --threads 1 --warmup W --runs R
// prints one JSON line. DIR is the installed onnxruntime-web package.
import { readFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import process from "node:process";

const start = performance.now();
const opts = { inputs: [] };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const [key, value] = [argv[i], argv[i + 1]];
  if (value === undefined) throw new Error(`${key} needs a value`);
  if (key === "--input") opts.inputs.push(value);
  else opts[key.replace(/^--/, "")] = value;
}
const ort = await import(pathToFileURL(join(opts.ort, "dist", "ort.node.min.mjs")).href);
ort.env.wasm.numThreads = Number(opts.threads ?? 1);
ort.env.wasm.simd = true;

// A .npy file (versions 1-3, little endian, C order) as an ORT tensor.
const TYPES = {
  "<f4": ["float32", Float32Array],
  "<f8": ["float64", Float64Array],
  "<f2": ["float16", Uint16Array],
  "<i8": ["int64", BigInt64Array],
  "<i4": ["int32", Int32Array],
  "<i2": ["int16", Int16Array],
  "|i1": ["int8", Int8Array],
  "|u1": ["uint8", Uint8Array],
  "|b1": ["bool", Uint8Array],
};
async function readNpy(path) {
  const buf = await readFile(path);
  const version = buf[6];
  const [len, at] = version === 1 ? [buf.readUInt16LE(8), 10] : [buf.readUInt32LE(8), 12];
  const header = buf.subarray(at, at + len).toString("latin1");
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1]
    .split(",").map((s) => s.trim()).filter((s) => s.length).map(Number);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran order`);
  const [type, Array_] = TYPES[descr] ?? [];
  if (!type) throw new Error(`${path}: unsupported dtype ${descr}`);
  const body = buf.subarray(at + len);
  // Copied into a fresh, aligned buffer.
  const data = new Array_(new Uint8Array(body).buffer);
  return new ort.Tensor(type, type === "bool" ? Uint8Array.from(data) : data, shape);
}

const session = await ort.InferenceSession.create(opts.model, {
  executionProviders: ["wasm"],
  graphOptimizationLevel: "all",
});
const feeds = {};
for (const spec of opts.inputs) {
  const eq = spec.indexOf("=");
  feeds[spec.slice(0, eq)] = await readNpy(spec.slice(eq + 1));
}
await session.run(feeds);
const first = performance.now() - start;
for (let i = 0; i < Number(opts.warmup ?? 3); i++) await session.run(feeds);
const times = [];
for (let i = 0; i < Number(opts.runs ?? 10); i++) {
  const t = performance.now();
  await session.run(feeds);
  times.push(performance.now() - t);
}
console.log(JSON.stringify({
  engine: "ort-web",
  threads: ort.env.wasm.numThreads,
  first_output_ms: first,
  times_ms: times,
  peak_rss_kb: process.resourceUsage().maxRSS,
}));
