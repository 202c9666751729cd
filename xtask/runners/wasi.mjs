// Cargo runner for wasm32-wasip1 test and bench binaries: runs the module
// under node's WASI with the working directory preopened, forwarding the
// arguments and the exit code (`CARGO_TARGET_WASM32_WASIP1_RUNNER`).
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
import process from "node:process";

const [wasmPath, ...args] = process.argv.slice(2);
const wasi = new WASI({
  version: "preview1",
  args: [wasmPath, ...args],
  env: process.env,
  preopens: { ".": process.cwd(), "/": "/" },
  returnOnExit: true,
});
const module = await WebAssembly.compile(await readFile(wasmPath));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exitCode = wasi.start(instance);
