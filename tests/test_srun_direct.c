/* Unit tests for the direct connection under srun (wire/direct.c, ssh/srun_step_direct.c):
 * HMAC-SHA-256 against RFC 4231's vectors; the handshake's lines, malformed ones refused; and
 * a step's listener on loopback driven by a client written here: the agent that proves the
 * key is attached to its member (its first lines, sent in the proof's segment, kept; requests
 * and "!eof" reach it unaddressed; its "!STATUS" ends the member), one with a wrong key, a
 * stranger's bytes or a line without end are cut off and their task stays unclaimed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ssh/srun_step_int.h"
#include "tap.h"
#include "util/util.h"
#include "wire/direct.h"

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
    snprintf(line, sizeof line, "ddptop-direct 1 7 %s", n32);
    CHECK(direct_hello_parse(line, &task, na) == 0 && task == 7 && strcmp(na, n32) == 0);
    snprintf(line, sizeof line, "ddptop-direct 2 7 %s", n32);
    CHECK_INT(direct_hello_parse(line, &task, na), -1);
    snprintf(line, sizeof line, "ddptop-direct 1 99999999999 %s", n32);
    CHECK_INT(direct_hello_parse(line, &task, na), -1);
    CHECK_INT(direct_hello_parse("ddptop-direct 1 7 0123", &task, na), -1);
    snprintf(line, sizeof line, "ddptop-direct 1 7 %sff", n32);
    CHECK_INT(direct_hello_parse(line, &task, na), -1);
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
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
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

/* The agent's half of the handshake with key; returns the proof line to send (without the
 * greeting), or "" when ddptop's answer did not check out. */
static void agent_side(struct srun_step *s, int fd, const unsigned char *key, int task, char *proof)
{
    const char *na = "00112233445566778899aabbccddeeff";
    char line[600], nc[33], mc[65], want[65];
    snprintf(line, sizeof line, "ddptop-direct 1 %d %s\n", task, na);
    send(fd, line, strlen(line), 0);
    pump_read_line(s, fd, line, sizeof line);
    proof[0] = '\0';
    if (direct_reply_parse(line, nc, mc) != 0) return;
    direct_mac(key, "controller", task, na, nc, want);
    if (!direct_mac_equal(mc, want)) return;
    direct_mac(key, "agent", task, na, nc, proof);
}

static void test_handshake(void)
{
    struct srun_step *s = step2();
    unsigned char wrong[32] = {0};
    char proof[65], line[600];
    int fd;
    CHECK(s->lfd >= 0 && s->dport > 0);

    /* a stranger's bytes: cut off, nothing claimed */
    fd = client(s);
    send(fd, "GET / HTTP/1.0\r\n\r\n", 18, 0);
    pump_read_line(s, fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(fd);
    /* a handshake line without end */
    fd = client(s);
    {
        char big[700];
        memset(big, 'x', sizeof big);
        send(fd, big, sizeof big, 0);
    }
    pump_read_line(s, fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(fd);
    /* a wrong key: ddptop's answer does not check out for it, and its proof is refused */
    fd = client(s);
    agent_side(s, fd, wrong, 0, proof);
    CHECK_STR(proof, "");
    direct_mac(wrong, "agent", 0, "00112233445566778899aabbccddeeff", "00000000000000000000000000000000", proof);
    snprintf(line, sizeof line, "%s =n1 10.0.0.1\n", proof);
    send(fd, line, strlen(line), 0);
    pump_read_line(s, fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(fd);
    CHECK(!s->m[0].announced && s->m[0].task == -1);

    /* the agent of task 1 with the key: its greeting and first line in one segment */
    fd = client(s);
    agent_side(s, fd, s->dkey, 1, proof);
    CHECK(proof[0] != '\0');
    snprintf(line, sizeof line, "%s =n2 10.0.0.2\n{\"ev\":\"hello\"}\n", proof);
    send(fd, line, strlen(line), 0);
    pump_some(s);
    CHECK(s->m[1].announced && s->m[1].task == 1 && s->m[1].direct);
    CHECK_STR(srun_step_address(s, 1), "10.0.0.2");
    {
        char *l = srun_step_next_line(s, 1);
        CHECK_STR(l, "{\"ev\":\"hello\"}");
        free(l);
    }
    /* requests go on its connection, unaddressed */
    srun_step_send(s, 1, "{\"op\":\"clock\",\"id\":1}");
    pump_read_line(s, fd, line, sizeof line);
    CHECK_STR(line, "{\"op\":\"clock\",\"id\":1}");
    CHECK_INT(s->wbuf.len, 0); /* nothing for srun's stdin */
    /* its lines, then its exit status, then its end */
    send(fd, "{\"ev\":\"clock\",\"id\":1}\n!0\n", 25, 0);
    close(fd);
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
    fd = client(s);
    agent_side(s, fd, s->dkey, 1, proof);
    snprintf(line, sizeof line, "%s =n2 10.0.0.2\n", proof);
    send(fd, line, strlen(line), 0);
    pump_read_line(s, fd, line, sizeof line);
    CHECK_STR(line, "<eof>");
    close(fd);

    /* task 0 attaches, then its socket ends without a status: srun's word on the task ends it */
    fd = client(s);
    agent_side(s, fd, s->dkey, 0, proof);
    snprintf(line, sizeof line, "%s =n1 -\n", proof);
    send(fd, line, strlen(line), 0);
    pump_some(s);
    CHECK(s->m[0].direct);
    CHECK_INT(s->lfd, -1); /* every node said where it is: the listener is gone */
    close(fd);
    pump_some(s);
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
    srun_step_feed(s, SRUN_STDERR, "srun: error: n1: task 0: Killed\n", 32);
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_CLOSED);
    CHECK_STR(srun_step_error(s, 0), "the agent's task on n1 ended: Killed");
    srun_step_release(s, 0);
    srun_step_release(s, 1);
}

int main(void)
{
    RUN(test_hmac_rfc4231);
    RUN(test_lines);
    RUN(test_handshake);
    return tap_done();
}
