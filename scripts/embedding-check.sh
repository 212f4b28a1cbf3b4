#!/usr/bin/env bash
# Acceptance check of docs/embedding.md: builds a fresh Maven project outside the repository from
# the page alone (its `<!-- file: PATH -->` blocks, its `<!-- example: ... -->` code blocks, and its
# `<!-- run: classpath|modulepath -->` command blocks), against the artifact `mvn install` puts in
# ~/.m2, and runs its tests and its start-up on the class path and on the module path. Fails when a
# step fails or when anything prints a warning (the JVM's restricted-method warning, SLF4J's
# no-provider notice, a Maven or javac [WARNING]).
#   scripts/embedding-check.sh            (KEEP=1 keeps the project folder and prints it)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/bin/lib/jdk.sh"
export JAVA_HOME="$JDK" PATH="$JDK/bin:$PATH"
doc="$here/docs/embedding.md"

work=$(mktemp -d "${TMPDIR:-/tmp}/mooncake4j-embedding.XXXXXX")
cleanup() { if [ "${KEEP:-0}" = 1 ]; then echo "project kept in $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT

echo "embedding-check: mvn install of mooncake4j (tests skipped)"
(cd "$here" && mvn -B -ntp -q install -DskipTests) >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }

proj="$work/kv-server"
mkdir -p "$proj"
# the page's blocks: files, examples (WorkerStartup and ExampleServer are the server's main code,
# the *Test files its tests) and the command blocks, each written where the page says
python3 - "$doc" "$proj" "$work" <<'PY'
import os, re, sys
doc, proj, work = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(doc, encoding='utf-8').read()
block = re.compile(r'<!-- (file|example|run): (\S+) -->\n\n```[a-z]*\n(.*?)```', re.S)
found = {'file': 0, 'example': 0, 'run': 0}
for kind, name, body in block.findall(text):
    found[kind] += 1
    if kind == 'file':
        path = os.path.join(proj, name)
    elif kind == 'example':
        base = os.path.basename(name)
        where = 'test' if base.endswith('Test.java') else 'main'
        path = os.path.join(proj, 'src', where, 'java', 'io', 'mooncake4j', 'examples', base)
    else:
        path = os.path.join(work, 'run-' + name + '.sh')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(body)
if not (found['file'] >= 2 and found['example'] >= 5 and found['run'] == 2):
    sys.exit('embedding-check: docs/embedding.md lacks blocks: %s' % found)
PY
# the module declaration belongs to the module-path step only
mv "$proj/src/main/java/module-info.java" "$work/module-info.java"

check_quiet() { # $1 = log: no warning of any kind
  local bad
  bad=$(grep -n -E '^WARNING:|\[WARNING\]|SLF4J\(W\)|SLF4J: |warning:' "$1" || true)
  if [ -n "$bad" ]; then
    echo "embedding-check: $2 printed warnings:" >&2
    echo "$bad" >&2
    return 1
  fi
}

run_step() { # $1 = step name (classpath | modulepath)
  echo "embedding-check: $1: tests and start-up"
  if ! (cd "$proj" && bash -euo pipefail "$work/run-$1.sh") >"$work/$1.log" 2>&1; then
    cat "$work/$1.log" >&2
    echo "embedding-check: the $1 commands of docs/embedding.md failed" >&2
    return 1
  fi
  grep -q 'Tests run: .*Failures: 0, Errors: 0' "$work/$1.log" || { cat "$work/$1.log" >&2;
    echo "embedding-check: $1: no test summary" >&2; return 1; }
  grep -q '^registered .* storages; bootstrap server http://' "$work/$1.log" || { cat "$work/$1.log" >&2;
    echo "embedding-check: $1: the start-up did not report its registration" >&2; return 1; }
  check_quiet "$work/$1.log" "$1"
  grep -E 'Tests run: [0-9]+, Failures' "$work/$1.log" | tail -1
}

run_step classpath
mv "$work/module-info.java" "$proj/src/main/java/module-info.java"
(cd "$proj" && mvn -B -ntp -q clean) >/dev/null
run_step modulepath
echo "embedding-check: OK (class path and module path, no warning)"
