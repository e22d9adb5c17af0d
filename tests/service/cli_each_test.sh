#!/usr/bin/env bash
# `glimpse analyze --each` end to end: starts glimpse-server on an ephemeral port, analyses a few
# files in one call (one of them not an image) and checks the rows against the single-call
# commands; then stops the server with SIGTERM (exit 0).
#   cli_each_test.sh SERVER_BINARY CLIENT_BINARY SAMPLE_PNG
# Skips (exit 0 with a note) when no EGL context can be opened, unless GLIMPSE_REQUIRE_GPU_CONTEXT=1.
set -uo pipefail
# shellcheck source=cli_server.sh
source "$(dirname "$0")/cli_server.sh"
start_server_or_skip --listen=127.0.0.1:0 --warm-up=0 --shutdown-grace-s=10

cp "$sample" "$work/a,b.png"  # a comma in the name: the key is quoted in the CSV
printf 'not an image' >"$work/bad.jpg"
g analyze --each "$sample" "$work/bad.jpg" "$work/a,b.png" --histogram=bins=4 \
  --compaction=lo=0,hi=100 >"$work/each.csv" 2>"$work/each.err"
rc=$?
[ "$rc" = 1 ] || fail "analyze --each with a bad file exited $rc, want 1"
grep -q "3 images, 1 failed" "$work/each.err" || fail "no summary on stderr: $(cat "$work/each.err")"
[ "$(wc -l <"$work/each.csv")" = 6 ] || fail "want a header and 5 rows: $(cat "$work/each.csv")"
[ "$(head -1 "$work/each.csv")" = "index,key,analysis,status,result" ] || fail "header"
grep -q "^1,$work/bad.jpg,,INVALID_ARGUMENT,\"images\[1\]: image.encoded.data" "$work/each.csv" ||
  fail "no error row naming images[1] and the field: $(cat "$work/each.csv")"
grep -q "^2,\"$work/a,b.png\",histogram,OK," "$work/each.csv" || fail "key not quoted"

# The histogram rows equal the histogram command's counts (its CSV: one row per bin, a column
# per channel), for both copies of the file.
g histogram "$sample" --bins=4 --csv="$work/h.csv" >/dev/null || fail "histogram"
want=$(awk -F, 'NR > 1 { for (c = 4; c <= NF; c++) col[c] = col[c] (NR > 2 ? " " : "") $c }
  END { for (c = 4; c <= NF; c++) printf "%s%s", (c > 4 ? ";" : ""), col[c] }' "$work/h.csv")
for i in 0 2; do
  got=$(grep "^$i,.*,histogram,OK," "$work/each.csv" | sed 's/.*,histogram,OK,//')
  [ "$got" = "$want" ] || fail "image $i histogram \"$got\", histogram command \"$want\""
done
# The compaction rows equal the compaction command's total.
total=$(g compaction "$sample" --lo=0 --hi=100 --csv="$work/c.csv" |
  sed -n 's/.*: \([0-9][0-9]*\) pixels pass.*/\1/p')
[ -n "$total" ] || fail "compaction printed no total"
grep -q "^0,$sample,compaction,OK,$total\$" "$work/each.csv" ||
  fail "compaction row differs from the command's total $total: $(cat "$work/each.csv")"

# JSON lines: each line parses; the good image's histogram has 3 channels of 4 bins.
g analyze --json --each "$sample" "$work/bad.jpg" --histogram=bins=4 >"$work/each.json" 2>/dev/null
[ $? = 1 ] || fail "analyze --json --each with a bad file should exit 1"
/usr/bin/python3 - "$work/each.json" <<'PY' || fail "JSON lines: $(cat "$work/each.json")"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 2, rows
assert rows[0]["analysis"] == "histogram" and rows[0]["status"] == "OK"
assert [len(c) for c in rows[0]["result"]] == [4, 4, 4], rows[0]
assert rows[1]["status"] == "INVALID_ARGUMENT" and rows[1]["error"].startswith("images[1]")
PY

# A file named in Latin-1 (not UTF-8, as Linux allows): its key and label are the name as text,
# each byte UTF-8 cannot read shown as U+FFFD; every image is answered.
latin1="$work/$(printf 'caf\xe9.png')"
cp "$sample" "$latin1"
g analyze --each "$latin1" "$sample" --histogram=bins=4 >"$work/latin1.csv" 2>"$work/latin1.err" ||
  fail "analyze --each of a Latin-1 file name: $(cat "$work/latin1.err")"
grep -q "2 images, 0 failed" "$work/latin1.err" || fail "summary: $(cat "$work/latin1.err")"
grep -q "^0,$work/caf$(printf '\xef\xbf\xbd').png,histogram,OK," "$work/latin1.csv" ||
  fail "key of the Latin-1 name: $(cat "$work/latin1.csv")"
lid=$(g upload "$latin1") || fail "upload of a Latin-1 file name"
g list | grep "$lid" | grep -q "caf$(printf '\xef\xbf\xbd').png" || fail "label: $(g list)"
g delete "$lid" >/dev/null || fail "delete $lid"

# Every file fine: exit 0.
g analyze --each "$sample" "$sample" --histogram >/dev/null 2>&1 || fail "two good files: exit $?"

kill -TERM "$server_pid"
wait "$server_pid"
rc=$?
server_pid=""
[ "$rc" = 0 ] || fail "server exit code $rc after SIGTERM"
echo "PASS"
