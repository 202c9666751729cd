// Runs a wasm32-wasip1 program under node's WASI with the working directory
// and the file system root preopened, forwarding its arguments and exit
// code: `node wasi_runner.mjs PROGRAM.wasm ARGS...`. `lele run|bench
// --target wasm32-wasip1` runs models with it, and the kernel tests use it
// as cargo's runner (`CARGO_TARGET_WASM32_WASIP1_RUNNER`).
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
