#!/usr/bin/env bash
# Build the documentation (gallery included, warnings are errors, every
# cross-reference resolved) and check its pages in a headless Chromium at
# 1280 px: overflowing code blocks, images wider than the column, broken
# images, unresolved references, and warning text, machine paths, truncated
# tables or stray reprs in the gallery's outputs. Screenshots go to
# docs/browser/screenshots/.
#
#   bash docs/check_pages.sh             # build, then check
#   bash docs/check_pages.sh --no-build  # check the last build
#
# Needs the docs extra (pip install -e ".[docs]") and node >= 18; the first
# run installs the two npm packages of docs/browser/package.json
# (puppeteer-core, and @sparticuz/chromium, which ships the browser).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
html="$here/_build/html"

if [[ "${1:-}" != "--no-build" ]]; then
    start=$(date +%s)
    sphinx-build -W -n -b html "$here" "$html"
    echo "sphinx-build -W -n: $(( $(date +%s) - start )) s"
fi
if [[ ! -d "$here/browser/node_modules/puppeteer-core" ]]; then
    (cd "$here/browser" && npm ci --no-audit --no-fund)
fi
node "$here/browser/check_pages.mjs" "$html" "$here/browser/screenshots"
