// Render pages of the built documentation in a headless Chromium at 1280 px,
// save a screenshot of each, and fail on what a reader would see as broken:
// code blocks that overflow horizontally, images (or tables) wider than their column,
// images that do not load, cross-references Sphinx could not resolve, and
// warning text, machine paths, truncated tables or stray object reprs in the
// outputs of the gallery.
//
//   node check_pages.mjs [HTML_DIR] [SCREENSHOT_DIR]
//
// HTML_DIR defaults to ../_build/html. The browser is the one shipped inside
// the npm package @sparticuz/chromium (no download at run time).

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import chromium from "@sparticuz/chromium";
import puppeteer from "puppeteer-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const htmlDir = path.resolve(process.argv[2] ?? path.join(here, "..", "_build", "html"));
const shotDir = path.resolve(process.argv[3] ?? path.join(here, "screenshots"));
const WIDTH = 1280;

function pages() {
  const list = ["index.html", "auto_tutorial/getting_started.html",
                "gen_modules/skacv.TrajectoryEarlyStoppingCV.html"];
  const guide = path.join(htmlDir, "user_guide");
  for (const f of fs.readdirSync(guide).filter((f) => f.endsWith(".html")).sort()) {
    list.push(`user_guide/${f}`);
  }
  const gallery = path.join(htmlDir, "auto_examples");
  for (const f of fs.readdirSync(gallery).filter((f) => /^plot_.*\.html$/.test(f)).sort()) {
    list.push(`auto_examples/${f}`);
  }
  return list;
}

// what the page shows, measured in the page
function inspect() {
  const article = document.querySelector("article.bd-article") ?? document.body;
  const column = article.getBoundingClientRect();
  const out = { overflowing: [], wide: [], broken: [], unresolved: [], noisy: [] };
  for (const pre of article.querySelectorAll("pre")) {
    // outputs wrap their long lines (custom.css): measure them unwrapped
    const wrap = pre.style.whiteSpace;
    pre.style.whiteSpace = "pre";
    const [scroll, client] = [pre.scrollWidth, pre.clientWidth];
    pre.style.whiteSpace = wrap;
    if (scroll > client + 1) {
      out.overflowing.push(`${scroll}px in ${client}px: ` +
                           pre.textContent.split("\n").sort((a, b) => b.length - a.length)[0]
                             .slice(0, 80));
    }
  }
  // tables scroll in their own box (custom.css): one that needs to is too wide
  for (const table of article.querySelectorAll("table")) {
    if (table.scrollWidth > table.clientWidth + 1) {
      out.wide.push(`a table of ${table.scrollWidth}px in ${table.clientWidth}px: ` +
                    table.textContent.trim().slice(0, 60));
    }
  }
  for (const img of article.querySelectorAll("img")) {
    const r = img.getBoundingClientRect();
    if (!img.complete || img.naturalWidth === 0) out.broken.push(img.getAttribute("src"));
    else if (r.width > column.width + 1 || r.right > column.right + 1) {
      out.wide.push(`${img.getAttribute("src")}: ${Math.round(r.width)}px in ` +
                    `${Math.round(column.width)}px`);
    }
  }
  // a resolved reference is a link around its code; an unresolved one is not
  for (const xref of article.querySelectorAll(".xref")) {
    if (!xref.closest("a")) out.unresolved.push(xref.textContent);
  }
  const noise = [
    [/\b\w*Warning:/, "warning"], [/\bwarnings\.warn\(/, "warning"],
    [/(\/site-packages\/|\/work\/|\/root\/|\/home\/|\/tmp\/)/, "machine path"],
    [/\[\d+ rows x \d+ columns\]/, "truncated table"],
    [/<[\w.]+ object at 0x[0-9a-f]+>/, "object repr"],
    [/^(Text|Line2D)\(/m, "object repr"], [/<matplotlib\.[^>]*>/, "object repr"],
  ];
  for (const block of article.querySelectorAll(".sphx-glr-script-out pre")) {
    for (const [re, what] of noise) {
      const m = block.textContent.match(re);
      if (m) out.noisy.push(`${what}: ${block.textContent.slice(Math.max(0, m.index - 40),
                                                                  m.index + 60).trim()}`);
    }
  }
  return out;
}

async function launch(tries = 3) {
  // the first launch unpacks the browser into /tmp; on a loaded machine it
  // can fail once
  for (let k = 1; ; k++) {
    try {
      return await puppeteer.launch({
        args: chromium.args,
        executablePath: await chromium.executablePath(),
        headless: true,
        defaultViewport: { width: WIDTH, height: 900 },
      });
    } catch (err) {
      if (k >= tries) throw err;
      console.error(`browser launch failed (${err.message.split("\n")[0]}), retrying`);
    }
  }
}
const browser = await launch();
fs.mkdirSync(shotDir, { recursive: true });
const totals = { overflowing: 0, wide: 0, broken: 0, unresolved: 0, noisy: 0 };
const rows = [];
let missing = 0;
for (const rel of pages()) {
  const file = path.join(htmlDir, rel);
  if (!fs.existsSync(file)) {
    rows.push(`MISSING  ${rel}`);
    missing += 1;
    continue;
  }
  const page = await browser.newPage();
  // the build is offline: MathJax's CDN is not reachable and need not be
  await page.setRequestInterception(true);
  page.on("request", (req) => (req.url().startsWith("file:") ? req.continue() : req.abort()));
  await page.goto(pathToFileURL(file).href, { waitUntil: "load" });
  await page.evaluate(async () => {
    // lazy images load when scrolled to
    for (const img of document.querySelectorAll("img")) img.loading = "eager";
    await Promise.all([...document.images].map((img) => img.complete ? null :
      new Promise((ok) => { img.onload = img.onerror = ok; })));
  });
  const found = await page.evaluate(inspect);
  const name = rel.replace(/\//g, "__").replace(/\.html$/, ".png");
  await page.screenshot({ path: path.join(shotDir, name), fullPage: true });
  await page.close();
  const counts = Object.fromEntries(Object.entries(found).map(([k, v]) => [k, v.length]));
  for (const k of Object.keys(totals)) totals[k] += counts[k];
  rows.push(`${Object.values(counts).some((c) => c) ? "FAIL" : "ok  "}     ${rel}  ` +
            Object.entries(counts).map(([k, v]) => `${k}=${v}`).join(" "));
  for (const [k, list] of Object.entries(found)) {
    for (const item of list.slice(0, 5)) rows.push(`           ${k}: ${item}`);
  }
}
await browser.close();

console.log(`Rendered at ${WIDTH} px from ${htmlDir}; screenshots in ${shotDir}`);
for (const row of rows) console.log(row);
console.log(`\nSummary over ${rows.filter((r) => /^(ok|FAIL)/.test(r)).length} pages: ` +
            `${totals.overflowing} overflowing code blocks, ${totals.wide} over-wide images or tables, ` +
            `${totals.broken} broken images, ${totals.unresolved} unresolved references, ` +
            `${totals.noisy} warning/path/repr/truncation texts in outputs, ` +
            `${missing} missing pages`);
process.exit(Object.values(totals).some((c) => c) || missing ? 1 : 0);
