# The rank of the control-plane tests (it_control_plane, it_run_netns, it_slurm_reconnect): it
# prints a numbered, timestamped line every 20 ms until $CTDIR/finish exists, and appends the
# same lines to $CTDIR/copy-$RANK, so that after any fault its log on disk must equal that copy
# byte for byte: nothing lost, nothing twice, in order. Its last line says how many it printed.

# ctrank_install PATH: writes the rank's script there, executable (its comm is then "ctrank"
# when PATH's name is).
ctrank_install() {
    cat >"$1" <<'SH'
#!/bin/sh
i=0
copy="$CTDIR/copy-$RANK"
: >"$copy"
while [ ! -e "$CTDIR/finish" ]; do
    line="rank $RANK line $i $(date +%s%N)"
    echo "$line"
    echo "$line" >>"$copy"
    i=$((i + 1))
    sleep 0.02
done
echo "rank $RANK printed $i lines"
echo "rank $RANK printed $i lines" >>"$copy"
SH
    chmod +x "$1"
}

# ctrank_logs_match RUN_DIR CT_DIR RANKS: every rank's attempt-0 log is its copy, byte for
# byte, and ends with its last line. Prints the line counts per rank (and, as "# " lines, each
# rank that differs: its lines and a checksum of log and copy); 0 when all match.
ctrank_logs_match() {
    /usr/bin/python3 - "$@" <<'PY'
import hashlib, sys
run_dir, ct, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad, counts = [], []
def sha(b): return hashlib.sha256(b).hexdigest()[:12]
for r in range(ranks):
    log = open(f"{run_dir}/attempt-0/rank-{r}.log", "rb").read()
    copy = open(f"{ct}/copy-{r}", "rb").read()
    counts.append(str(len(copy.splitlines())))
    if log != copy:
        bad.append(f"rank {r}: log {len(log.splitlines())} lines sha {sha(log)}, "
                   f"copy {len(copy.splitlines())} lines sha {sha(copy)}")
    elif not copy.endswith(b" lines\n"):
        bad.append(f"rank {r}: no last line")
for b in bad: print("# " + b)
print(" ".join(counts))
sys.exit(1 if bad else 0)
PY
}
