/* Unit tests for the direct connection under srun (wire/direct.c, wire/direct_line.c,
 * ssh/srun_step_direct.c, ssh/srun_step_dlink.c): HMAC-SHA-256 against RFC 4231's vectors; the
 * handshake's lines, malformed ones refused; sealed lines (a changed, replayed, dropped or
 * reflected line fails its check); and a step's listener on loopback driven by a client written
 * here: the agent that proves the key is attached to its member (its first lines, sent in the
 * proof's segment, kept; requests and "!eof" reach it unaddressed and sealed; its "!STATUS" ends
 * the member), one with a wrong key, a stranger's bytes or a line without end are cut off and
 * their task stays unclaimed. Issue 28's attacks on loopback: a stranger's idle connections
 * filling every place (the agent still gets in, and the step's log gets a line or two, not one
 * per connection), and lines written into an agent's connection without the key (refused, the
 * member fails; before, a forged line was taken as the agent's). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ssh/srun_step_int.h"
#include "tap.h"
#include "util/util.h"
#include "wire/direct.h"
#include "wire/direct_line.h"

static void test_hmac_rfc4231(void)
{
    unsigned char k1[20];
    char out[65];
    memset(k1, 0x0b, sizeof k1);
    direct_hmac_hex(k1, sizeof k1, "Hi There", 8, out);
    CHECK_STR(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    direct_hmac_hex((const unsigned char *)"Jefe", 4, "what do ya want for nothing?", 28, out);
    CHECK_STR(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    {
        /* test case 6: a key longer than the block is hashed first */
        unsigned char k6[131];
        const char *m = "Test Using Larger Than Block-Size Key - Hash Key First";
        memset(k6, 0xaa, sizeof k6);
        direct_hmac_hex(k6, sizeof k6, m, strlen(m), out);
        CHECK_STR(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }
}

static void test_lines(void)
{
    int task = -1;
    char na[33], nc[33], mac[65];
    const char *g = NULL;
    unsigned char key[32];
    const char *n32 = "0123456789abcdef0123456789abcdef";
    const char *m64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char line[200];
    snprintf(line, sizeof line, "ddptop-direct 2 7 %s %s", n32, m64);
    CHECK(direct_hello_parse(line, &task, na, mac) == 0 && task == 7 && strcmp(na, n32) == 0 && strcmp(mac, m64) == 0);
    snprintf(line, sizeof line, "ddptop-direct 1 7 %s %s", n32, m64); /* the first version's */
    CHECK_INT(direct_hello_parse(line, &task, na, mac), -1);
    snprintf(line, sizeof line, "ddptop-direct 1 7 %s", n32);
    CHECK_INT(direct_hello_parse(line, &task, na, mac), -1);
    snprintf(line, sizeof line, "ddptop-direct 2 99999999999 %s %s", n32, m64);
    CHECK_INT(direct_hello_parse(line, &task, na, mac), -1);
    CHECK_INT(direct_hello_parse("ddptop-direct 2 7 0123", &task, na, mac), -1);
    snprintf(line, sizeof line, "ddptop-direct 2 7 %s %sff", n32, m64);
    CHECK_INT(direct_hello_parse(line, &task, na, mac), -1);
    snprintf(line, sizeof line, "ddptop-direct 2 7 %s %.63s", n32, m64);
    CHECK_INT(direct_hello_parse(line, &task, na, mac), -1);
    snprintf(line, sizeof line, "%s %s", n32, m64);
    CHECK(direct_reply_parse(line, nc, mac) == 0 && strcmp(nc, n32) == 0 && strcmp(mac, m64) == 0);
    snprintf(line, sizeof line, "%s %.63s", n32, m64);
    CHECK_INT(direct_reply_parse(line, nc, mac), -1);
    snprintf(line, sizeof line, "%s =n1 10.0.0.1 kept", m64);
    CHECK(direct_proof_parse(line, mac, &g) == 0 && strcmp(g, "n1 10.0.0.1 kept") == 0);
    snprintf(line, sizeof line, "%s n1 10.0.0.1", m64);
    CHECK_INT(direct_proof_parse(line, mac, &g), -1);
    CHECK_INT(direct_key_parse(m64, key), 0);
    CHECK_INT(direct_key_parse("0123", key), -1);
    CHECK_INT(direct_key_parse("0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", key), -1);
    CHECK(direct_mac_equal(m64, m64));
    CHECK(!direct_mac_equal(m64, "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(!direct_mac_equal(m64, "0123"));
}

/* Sealed lines: each opens once, in order, in its own direction and connection only. */
static void test_sealed_lines(void)
{
    unsigned char key[32];
    struct direct_line_key a_tx, c_rx, c_rx2, c_tx, other;
    struct strbuf b;
    const char *na = "00112233445566778899aabbccddeeff", *nc = "ffeeddccbbaa99887766554433221100";
    char l0[200], l1[200], l2[200];
    size_t n0, n1, n2;
    memset(key, 7, sizeof key);
    direct_line_init(&a_tx, key, DIRECT_ROLE_AGENT_LINES, 3, na, nc);
    direct_line_init(&c_rx, key, DIRECT_ROLE_AGENT_LINES, 3, na, nc);
    direct_line_init(&c_tx, key, DIRECT_ROLE_CONTROLLER_LINES, 3, na, nc);
    strbuf_init(&b);
    direct_line_seal(&a_tx, "{\"ev\":\"hello\"}", 14, &b);
    CHECK_INT(b.len, DIRECT_LINE_OVERHEAD + 14 + 1);
    CHECK(b.buf[b.len - 1] == '\n' && b.buf[DIRECT_TAG_HEX] == ' ' && memcmp(b.buf + DIRECT_LINE_OVERHEAD, "{\"ev\"", 5) == 0);
    n0 = b.len - 1;
    memcpy(l0, b.buf, n0);
    strbuf_reset(&b);
    direct_line_seal(&a_tx, "", 0, &b); /* an empty line is a line too */
    n1 = b.len - 1;
    memcpy(l1, b.buf, n1);
    strbuf_reset(&b);
    direct_line_seal(&a_tx, "!0", 2, &b);
    n2 = b.len - 1;
    memcpy(l2, b.buf, n2);
    c_rx2 = c_rx;
    /* the reflection of a line to its sender, and another connection's key, fail */
    CHECK_INT(direct_line_open(&c_tx, l0, n0), -1);
    direct_line_init(&other, key, DIRECT_ROLE_AGENT_LINES, 3, na, "ffeeddccbbaa99887766554433221101");
    CHECK_INT(direct_line_open(&other, l0, n0), -1);
    /* in order: each opens, once */
    CHECK_INT(direct_line_open(&c_rx, l0, n0), DIRECT_LINE_OVERHEAD);
    CHECK_INT(direct_line_open(&c_rx, l0, n0), -1); /* a replay */
    CHECK_INT(direct_line_open(&c_rx, l1, n1), DIRECT_LINE_OVERHEAD);
    CHECK_INT(direct_line_open(&c_rx, l2, n2), DIRECT_LINE_OVERHEAD);
    /* a line dropped on the way: the next one fails */
    CHECK_INT(direct_line_open(&c_rx2, l0, n0), DIRECT_LINE_OVERHEAD);
    CHECK_INT(direct_line_open(&c_rx2, l2, n2), -1);
    /* a changed byte, a changed tag, a tag in capitals, a bare line */
    direct_line_init(&c_rx, key, DIRECT_ROLE_AGENT_LINES, 3, na, nc);
    l0[n0 - 2] ^= 1;
    CHECK_INT(direct_line_open(&c_rx, l0, n0), -1);
    l0[n0 - 2] ^= 1;
    l0[0] = l0[0] == '0' ? '1' : '0';
    CHECK_INT(direct_line_open(&c_rx, l0, n0), -1);
    CHECK_INT(direct_line_open(&c_rx, "{\"op\":\"spawn\"}", 14), -1);
    CHECK_INT(direct_line_open(&c_rx, "", 0), -1);
    CHECK_INT(c_rx.seq, 0);
    direct_line_wipe(&c_rx);
    CHECK_INT(c_rx.seq, 0);
    strbuf_done(&b);
}

static struct srun_step *step2(void)
{
    static const char *const names[] = {"n1", "n2"};
    struct srun_step_opts o = {.agent_path = "/nonexistent/ddptop-agent"};
    struct srun_step *s = srun_step_new(&o, names, 2);
    srun_step_direct_open(s);
    s->started = true; /* as if srun ran: no process, no pipe */
    return s;
}

static int client(const struct srun_step *s)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->dport)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    /* as the agent: each line leaves at once (else a second small write waits for an ACK) */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Pumps the step (its handshakes, both members) until fd has something to read or ended;
 * reads one line of it into line (""; on end of file "<eof>"). */
static void pump_read_line(struct srun_step *s, int fd, char *line, size_t len)
{
    size_t n = 0;
    line[0] = '\0';
    for (int i = 0; i < 400 && n + 1 < len; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        srun_step_direct_accept(s);
        srun_step_member_pump(s, 0, POLLIN);
        srun_step_member_pump(s, 1, POLLIN);
        if (poll(&p, 1, 5) <= 0) continue;
        ssize_t r = recv(fd, line + n, 1, 0);
        if (r <= 0) {
            snprintf(line, len, "<eof>");
            return;
        }
        if (line[n] == '\n') break;
        n++;
    }
    line[n] = '\0';
}

static void pump_some(struct srun_step *s)
{
    for (int i = 0; i < 20; i++) {
        srun_step_direct_accept(s);
        srun_step_member_pump(s, 0, POLLIN);
        srun_step_member_pump(s, 1, POLLIN);
        usleep(2000);
    }
}

/* The agent's side of one connection, as written here. */
struct fake_agent {
    int fd;
    char proof[65];                /* "" when ddptop's answer did not check out */
    struct direct_line_key tx, rx; /* its lines' keys, once the answer checked out */
};

/* The agent's half of the handshake with key: sends its hello (with HM under key), reads
 * ddptop's answer and checks it; a->proof is the proof line to send (without the greeting). */
static void agent_side(struct srun_step *s, struct fake_agent *a, const unsigned char *key, int task)
{
    const char *na = "00112233445566778899aabbccddeeff";
    char line[600], nc[33], mc[65], want[65];
    direct_mac(key, "hello", task, na, NULL, want);
    snprintf(line, sizeof line, "ddptop-direct 2 %d %s %s\n", task, na, want);
    send(a->fd, line, strlen(line), 0);
    pump_read_line(s, a->fd, line, sizeof line);
    a->proof[0] = '\0';
    if (direct_reply_parse(line, nc, mc) != 0) return;
    direct_mac(key, "controller", task, na, nc, want);
    if (!direct_mac_equal(mc, want)) return;
    direct_mac(key, "agent", task, na, nc, a->proof);
    direct_line_init(&a->tx, key, DIRECT_ROLE_AGENT_LINES, task, na, nc);
    direct_line_init(&a->rx, key, DIRECT_ROLE_CONTROLLER_LINES, task, na, nc);
}

/* Sends line (no '\n'), sealed as the agent seals it. */
static void agent_send(struct fake_agent *a, const char *line)
{
    struct strbuf b;
    strbuf_init(&b);
    direct_line_seal(&a->tx, line, strlen(line), &b);
    send(a->fd, b.buf, b.len, 0);
    strbuf_done(&b);
}

/* One line from ddptop, opened: its text, or "<eof>", or "<forged>" when its MAC is wrong. */
static void agent_read(struct srun_step *s, struct fake_agent *a, char *line, size_t len)
{
    int at;
    pump_read_line(s, a->fd, line, len);
    if (strcmp(line, "<eof>") == 0) return;
    at = direct_line_open(&a->rx, line, strlen(line));
    if (at < 0) snprintf(line, len, "<forged>");
    else memmove(line, line + at, strlen(line + at) + 1);
}

static void test_handshake(void)
{
    struct srun_step *s = step2();
    unsigned char wrong[32] = {0};
    char line[600];
    struct fake_agent a;
    CHECK(s->lfd >= 0 && s->dport > 0);

    /* a stranger's bytes: cut off, nothing claimed */
    a.fd = client(s);
    send(a.fd, "GET / HTTP/1.0\r\n\r\n", 18, 0);
    pump_read_line(s, a.fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(a.fd);
    /* a handshake line without end */
    a.fd = client(s);
    {
        char big[700];
        memset(big, 'x', sizeof big);
        send(a.fd, big, sizeof big, 0);
    }
    pump_read_line(s, a.fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(a.fd);
    /* a wrong key: ddptop's answer does not check out for it, and its proof is refused */
    a.fd = client(s);
    agent_side(s, &a, wrong, 0);
    CHECK_STR(a.proof, "");
    direct_mac(wrong, "agent", 0, "00112233445566778899aabbccddeeff", "00000000000000000000000000000000", a.proof);
    snprintf(line, sizeof line, "%s =n1 10.0.0.1\n", a.proof);
    send(a.fd, line, strlen(line), 0);
    pump_read_line(s, a.fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(a.fd);
    CHECK(!s->m[0].announced && s->m[0].task == -1);

    /* the agent of task 1 with the key: its greeting and first line in one segment */
    a.fd = client(s);
    agent_side(s, &a, s->dkey, 1);
    CHECK(a.proof[0] != '\0');
    {
        struct strbuf b;
        strbuf_init(&b);
        strbuf_addf(&b, "%s =n2 10.0.0.2\n", a.proof);
        direct_line_seal(&a.tx, "{\"ev\":\"hello\"}", 14, &b);
        send(a.fd, b.buf, b.len, 0);
        strbuf_done(&b);
    }
    pump_some(s);
    CHECK(s->m[1].announced && s->m[1].task == 1 && s->m[1].direct);
    CHECK_STR(srun_step_address(s, 1), "10.0.0.2");
    {
        char *l = srun_step_next_line(s, 1);
        CHECK_STR(l, "{\"ev\":\"hello\"}");
        free(l);
    }
    /* requests go on its connection, unaddressed and sealed */
    srun_step_send(s, 1, "{\"op\":\"clock\",\"id\":1}");
    agent_read(s, &a, line, sizeof line);
    CHECK_STR(line, "{\"op\":\"clock\",\"id\":1}");
    CHECK_INT(s->wbuf.len, 0); /* nothing for srun's stdin */
    /* its lines, then its exit status, then its end */
    agent_send(&a, "{\"ev\":\"clock\",\"id\":1}");
    agent_send(&a, "!0");
    close(a.fd);
    pump_some(s);
    {
        char *l = srun_step_next_line(s, 1);
        CHECK_STR(l, "{\"ev\":\"clock\",\"id\":1}");
        free(l);
    }
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_CLOSED);
    CHECK_STR(srun_step_error(s, 1), "the agent on n2 exited with status 0");
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
    /* a second claim of task 1, even with the key, finds nobody waiting */
    a.fd = client(s);
    agent_side(s, &a, s->dkey, 1);
    snprintf(line, sizeof line, "%s =n2 10.0.0.2\n", a.proof);
    send(a.fd, line, strlen(line), 0);
    pump_read_line(s, a.fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(a.fd);

    /* task 0 attaches, then its socket ends without a status: srun's word on the task ends it */
    a.fd = client(s);
    agent_side(s, &a, s->dkey, 0);
    snprintf(line, sizeof line, "%s =n1 -\n", a.proof);
    send(a.fd, line, strlen(line), 0);
    pump_some(s);
    CHECK(s->m[0].direct);
    CHECK_INT(s->lfd, -1); /* every node said where it is: the listener is gone */
    {
        static const unsigned char zero[32];
        CHECK(memcmp(s->dkey, zero, sizeof zero) == 0); /* and the key with it */
    }
    close(a.fd);
    pump_some(s);
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
    srun_step_feed(s, SRUN_STDERR, "srun: error: n1: task 0: Killed\n", 32);
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_CLOSED);
    CHECK_STR(srun_step_error(s, 0), "the agent's task on n1 ended: Killed");
    srun_step_release(s, 0);
    srun_step_release(s, 1);
}

/* Lines of the step's log (its stderr file) that contain what. */
static int log_count(const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strstr(line, what)) n++;
    fclose(f);
    return n;
}

/* Issue 28, finding 2: a stranger fills every place with idle connections (the step's size plus
 * 16), then keeps connecting, some with a hello that does not hold the key; the agents still get
 * in, and the step's log says the first refusal and then one summary, not a line per try.
 * Before: every place stayed taken for 5 s (again and again), the agent met EOF at once and
 * spoke through srun's I/O for the whole run, and each refusal was a line of the log. */
static void test_crowd(void)
{
    struct srun_step *s = step2();
    char logpath[] = "/tmp/ddptop-test-srun-direct-XXXXXX", line[600];
    int strangers[200], ns = 0;
    struct fake_agent a, b;
    s->log_fd = mkstemp(logpath);
    CHECK(s->log_fd >= 0);
    /* strangers' bytes, one connection after another: each refused */
    for (int i = 0; i < 30; i++) {
        int fd = client(s);
        send(fd, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL);
        pump_read_line(s, fd, line, sizeof line);
        close(fd);
    }
    for (; ns < (int)s->n + 16; ns++) strangers[ns] = client(s);
    pump_some(s);
    CHECK_INT(s->npend, s->n + 16);
    /* the agent of task 0 arrives: it gets a place and its answer */
    a.fd = client(s);
    agent_side(s, &a, s->dkey, 0);
    CHECK(a.proof[0] != '\0');
    /* more strangers while it sends its proof: idle ones, and hellos with a wrong HM */
    for (int i = 0; i < 60; i++, ns++) {
        strangers[ns] = client(s);
        if (i % 2) {
            snprintf(line, sizeof line, "ddptop-direct 2 1 00112233445566778899aabbccddeeff %064d\n", 0);
            send(strangers[ns], line, strlen(line), 0);
        }
        srun_step_direct_accept(s);
    }
    snprintf(line, sizeof line, "%s =n1 10.0.0.1\n", a.proof);
    send(a.fd, line, strlen(line), 0);
    agent_send(&a, "{\"ev\":\"hello\"}");
    pump_some(s);
    CHECK(s->m[0].announced && s->m[0].direct);
    /* and the second agent, after all that */
    for (int i = 0; i < 40; i++, ns++) strangers[ns] = client(s);
    b.fd = client(s);
    agent_side(s, &b, s->dkey, 1);
    CHECK(b.proof[0] != '\0');
    snprintf(line, sizeof line, "%s =n2 10.0.0.2\n", b.proof);
    send(b.fd, line, strlen(line), 0);
    pump_some(s);
    CHECK(s->m[1].announced && s->m[1].direct);
    CHECK_INT(s->lfd, -1);
    CHECK_INT(s->npend, 0); /* the strangers still waiting went with the listener */
    /* the log: the first refusal, then the rest summed up once the listener closed */
    CHECK_INT(log_count(logpath, "was refused"), 1);
    CHECK_INT(log_count(logpath, "more direct connections were refused"), 1);
    CHECK_INT(log_count(logpath, "direct connection"), 4); /* the two agents' lines besides */
    {
        FILE *f = fopen(logpath, "r");
        char all[4096] = "";
        size_t got = f ? fread(all, 1, sizeof all - 1, f) : 0;
        all[got] = '\0';
        if (f) fclose(f);
        CHECK(strstr(all, "let go for a newer one: every place was taken, and it had not shown the key") != NULL);
        if (!strstr(all, "let go for a newer one")) printf("# log:\n%s", all);
    }
    for (int i = 0; i < ns; i++) close(strangers[i]);
    close(a.fd);
    close(b.fd);
    unlink(logpath);
    srun_step_release(s, 0);
    srun_step_release(s, 1);
}

/* Issue 28, finding 5: lines written into an agent's connection by someone without the key.
 * Before: taken as the agent's own lines. */
static void test_forged(void)
{
    struct srun_step *s = step2();
    struct fake_agent a, b;
    char line[600], saved[600];
    a.fd = client(s);
    agent_side(s, &a, s->dkey, 0);
    snprintf(line, sizeof line, "%s =n1 10.0.0.1\n", a.proof);
    send(a.fd, line, strlen(line), 0);
    agent_send(&a, "{\"ev\":\"hello\"}");
    b.fd = client(s);
    agent_side(s, &b, s->dkey, 1);
    snprintf(line, sizeof line, "%s =n2 10.0.0.2\n", b.proof);
    send(b.fd, line, strlen(line), 0);
    pump_some(s);
    CHECK(s->m[0].direct && s->m[1].direct);
    {
        char *l = srun_step_next_line(s, 0);
        CHECK_STR(l, "{\"ev\":\"hello\"}");
        free(l);
    }
    /* n1: a bare line, as an injector would write it */
    send(a.fd, "{\"ev\":\"exit\",\"rank\":0,\"code\":0}\n", 32, 0);
    pump_some(s);
    {
        char *l = srun_step_next_line(s, 0);
        CHECK(l == NULL);
        free(l);
    }
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_FAILED);
    CHECK(strstr(srun_step_error(s, 0), "line 2 on the direct connection from the agent on n1 failed its check") != NULL);
    CHECK_INT(s->m[0].dfd, -1);
    /* n2: a line of its own sent again (a replay) */
    {
        struct strbuf m;
        strbuf_init(&m);
        direct_line_seal(&b.tx, "{\"ev\":\"status\"}", 15, &m);
        send(b.fd, m.buf, m.len, 0);
        snprintf(saved, sizeof saved, "%.*s", (int)m.len, m.buf);
        strbuf_done(&m);
    }
    pump_some(s);
    {
        char *l = srun_step_next_line(s, 1);
        CHECK_STR(l, "{\"ev\":\"status\"}");
        free(l);
    }
    send(b.fd, saved, strlen(saved), 0);
    pump_some(s);
    {
        char *l = srun_step_next_line(s, 1);
        CHECK(l == NULL);
        free(l);
    }
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_FAILED);
    /* and nothing more of it is read, not even a right line */
    agent_send(&b, "{\"ev\":\"status\"}");
    pump_some(s);
    {
        char *l = srun_step_next_line(s, 1);
        CHECK(l == NULL);
        free(l);
    }
    close(a.fd);
    close(b.fd);
    srun_step_release(s, 0);
    srun_step_release(s, 1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a stranger's socket let go may be written to */
    RUN(test_hmac_rfc4231);
    RUN(test_lines);
    RUN(test_sealed_lines);
    RUN(test_handshake);
    RUN(test_crowd);
    RUN(test_forged);
    return tap_done();
}
