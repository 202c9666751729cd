// Runs a wasm32-wasip1 program under node's WASI with the working directory
// and the file system root preopened, forwarding its arguments and exit
// code: `node wasi_runner.mjs PROGRAM.wasm ARGS...`. `lele run|bench
// --target wasm32-wasip1` runs models with it, and the kernel tests use it
// as cargo's runner (`CARGO_TARGET_WASM32_WASIP1_RUNNER`).
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
import process from "node:process";
import v8 from "node:v8";

const [wasmPath, ...args] = process.argv.slice(2);
const wasi = new WASI({
  version: "preview1",
  args: [wasmPath, ...args],
  env: process.env,
  preopens: { ".": process.cwd(), "/": "/" },
  returnOnExit: true,
});
const bytes = await readFile(wasmPath);
// A module built with relaxed SIMD (`--target wasm32-wasip1+relaxed-simd`)
// does not compile on node before 22 until V8's flag for it is set.
let module;
try {
  module = await WebAssembly.compile(bytes);
} catch (e) {
  if (!(e instanceof WebAssembly.CompileError)) throw e;
  v8.setFlagsFromString("--experimental-wasm-relaxed-simd");
  module = await WebAssembly.compile(bytes);
}
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exitCode = wasi.start(instance);
