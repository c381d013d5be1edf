#!/usr/bin/env node
// Render LaTeX fragments with KaTeX and report every one that fails.
//
// stdin:  a JSON list of fragments; each is a string (display math) or an object
//         {"latex": "...", "display": true|false, "where": "what produced it"}.
// stdout: a JSON list of errors, one per failing fragment:
//         {"index": i, "latex": "...", "where": "...", "error": "KaTeX parse error: ..."}.
// Exit 0 when every fragment renders, 1 when some do not, 2 when the input is not a JSON list.
//
// Rendering uses throwOnError: true and strict: "error", so an unknown command, an unbalanced brace
// or a construct KaTeX only tolerates (unicode text in math mode) counts as an error.
"use strict";

const katex = require("katex");

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on("data", (c) => chunks.push(c));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

function normalize(item, index) {
  if (typeof item === "string") return { latex: item, display: true, where: "" };
  if (item && typeof item === "object" && typeof item.latex === "string") {
    return { latex: item.latex, display: item.display !== false, where: String(item.where || "") };
  }
  throw new Error(`fragment ${index} is neither a string nor {"latex": ...}`);
}

async function main() {
  let items;
  try {
    items = JSON.parse(await readStdin());
    if (!Array.isArray(items)) throw new Error("the input is not a JSON list");
    items = items.map(normalize);
  } catch (err) {
    process.stderr.write(`katex_check: ${err.message}\n`);
    process.exit(2);
  }
  const errors = [];
  items.forEach((item, index) => {
    try {
      katex.renderToString(item.latex, {
        displayMode: item.display,
        throwOnError: true,
        strict: "error",
        trust: false,
      });
    } catch (err) {
      errors.push({ index, latex: item.latex, where: item.where, error: String(err.message || err) });
    }
  });
  process.stdout.write(JSON.stringify(errors) + "\n");
  process.exit(errors.length ? 1 : 0);
}

main();
