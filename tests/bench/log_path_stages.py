#!/usr/bin/python3
# The log path's profile in stages (docs/performance.md, "Issue 22: the log path"): reads
# `perf script -F comm,tid,ip,sym,dso` of a BENCH_PERF round of tests/bench/run_launch.sh and
# prints, per process (controller with its threads, agent, sshd, the ranks), the share of
# all samples of those processes by stage: kernel samples by the system call in their chain,
# user samples by their leaf function. Use: tests/bench/log_path_stages.py SCRIPT.txt
# Kernel samples by the syscall in their chain; user samples by their leaf function.
import collections, re, sys
K = [("recvfrom","socket reads"),("sendto","socket writes"),("read","pipe/socket reads"),("write","writes"),
     ("writev","writes"),("poll","poll"),("futex","thread hand-over (futex)"),("fdatasync","fdatasync"),
     ("exc_page_fault","page faults")]
U = [
 (r"libcrypto|^(aes|gcm|chacha|poly1305)", "cipher (libcrypto / sshd's own)"),
 (r"libssh", "libssh packet/channel code"),
 (r"^(malloc|cfree|free|_int_free|_int_malloc|malloc_consolidate|realloc|_int_realloc|unlink_chunk.*|__libc_malloc)", "malloc/free"),
 (r"^(__memmove|__memcpy|memcpy)", "memcpy"),
 (r"^(__memchr|memchr|__memrchr|memrchr)", "memchr (line splitting)"),
 (r"^(stream_json_text|stream_json_string|json_plain8|json_ascii8|strbuf_addf|strbuf_vaddf|__vfprintf_internal|send_out|base64_encode)$", "JSON framing (escape)"),
 (r"^(stream_utf8_valid|ascii8|utf8_seq)$", "UTF-8 check"),
 (r"^(has_loss_word|__GI___memmem|memmem|metrics_.*|step_line_.*|note_steps)$", "metrics / step scan"),
 (r"^(sanitize_append.*|on_line|emit|headless.*)$", "headless printer"),
 (r"^(log_ring_.*|job_log_keep|out_line|job_rank_host)$", "per-line model (ring)"),
 (r"^(fast_out|json_flat_.*|scan_string|strbuf_take_line|strbuf_next_line|agent_message)$", "JSON decode"),
 (r"^(outbox_.*|append|trim)$", "outbox"),
 (r"^(strbuf_.*)$", "strbuf"),
]
def grp(comm):
    if comm == "ddptop": return "controller"
    if comm.startswith("ddptop-agent"): return "agent"
    if comm == "sshd": return "sshd"
    if comm in ("fold","tr","head"): return "ranks"
    if comm == "ssh": return "ssh client"
    return None
cnt = collections.Counter(); tot = collections.Counter(); tids = collections.defaultdict(collections.Counter)
def fl(comm, tid, frames):
    g = grp(comm) if comm else None
    if not g or not frames: return
    tot[g] += 1
    tids[g][tid] += 1
    syms = [s for s, d in frames]
    if "kernel" in frames[0][1]:
        st = "kernel: other (softirq, loopback TCP, scheduler)"
        for s in syms:
            m = re.match(r"__x64_sys_(\w+)|^(exc_page_fault)$|^ksys_(\w+)$", s)
            if m:
                name = m.group(1) or m.group(2) or m.group(3)
                for k, lab in K:
                    if name == k: st = "kernel: " + lab; break
                else: st = "kernel: " + name
                break
        cnt[(g, st)] += 1; return
    if g == "sshd" and frames[0][1].endswith("/sshd"):
        # no symbols: OpenSSH's own chacha20-poly1305 (and its packet code) live in sshd itself
        cnt[(g, "sshd's own code (its chacha20-poly1305, packets)")] += 1; return
    if g == "controller" and re.match(r"^(strbuf_addf|strbuf_vaddf|__vfprintf_internal)$", frames[0][0]):
        cnt[(g, "headless printer")] += 1; return
    for rx, lab in U:
        if re.search(rx, frames[0][0]) or re.search(rx, frames[0][1]):
            cnt[(g, lab)] += 1; return
    cnt[(g, "other user code")] += 1
comm = tid = None; frames = []
for line in open(sys.argv[1], errors="replace"):
    if not line.strip():
        fl(comm, tid, frames); comm = None; frames = []; continue
    if not line.startswith("\t"):
        fl(comm, tid, frames); p = line.split(); comm, tid = p[0], p[1]; frames = []; continue
    m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)\s*$", line)
    if m: frames.append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
fl(comm, tid, frames)
all_ = sum(tot.values())
print(f"# {all_} samples on the log path")
for g, n in tot.most_common():
    print(f"{g:12s} {100*n/all_:5.1f}%   threads: " + ", ".join(f"{100*v/all_:.1f}%" for t, v in tids[g].most_common(3)) if g=="controller" else f"{g:12s} {100*n/all_:5.1f}%")
    for (gg, st), v in sorted(cnt.items(), key=lambda x: -x[1]):
        if gg == g and 100*v/all_ >= 0.4: print(f"    {st:50s} {100*v/all_:5.1f}%")
