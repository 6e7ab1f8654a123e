/* Unit tests for tui/keymap.c: every key the issue names does what it says in the right mode,
 * no key is bound twice in one mode, the help overlay (generated from the table) lists every
 * bound key, the modal states (help, search, question, preflight) take their own keys, and
 * which actions ask before they act. */
#include <curses.h>
#include <stdlib.h>
#include <string.h>

#include "keymap.h"
#include "tap.h"

#define ESC 27

static const enum km_mode focus_modes[] = { KM_RANKS, KM_LOG, KM_EVENTS };

/* The keys of the issue and what they must do in every focused pane. */
static const struct {
    int key;
    enum ui_action action;
} everywhere[] = {
    { KEY_UP, UI_UP },           { 'k', UI_UP },
    { KEY_DOWN, UI_DOWN },       { 'j', UI_DOWN },
    { KEY_PPAGE, UI_PAGE_UP },   { KEY_NPAGE, UI_PAGE_DOWN },
    { KEY_HOME, UI_HOME },       { KEY_END, UI_END },
    { '\t', UI_FOCUS_NEXT },     { KEY_BTAB, UI_FOCUS_PREV },
    { 'r', UI_RESTART },         { 'K', UI_STOP },
    { 's', UI_STACKS },          { '/', UI_SEARCH },
    { 'n', UI_SEARCH_NEXT },     { 'N', UI_SEARCH_PREV },
    { 'e', UI_NEXT_ERROR },      { 'f', UI_FOLLOW },
    { 'a', UI_ALL_RANKS },       { 'g', UI_GRID },
    { 'L', UI_LOG_SCALE },       { 't', UI_NEXT_THEME },
    { '?', UI_HELP },            { 'q', UI_QUIT },
    { ESC, UI_CANCEL },          { 12 /* Ctrl-L */, UI_REDRAW },
};

static void test_issue_keys_in_every_pane(void)
{
    for (size_t m = 0; m < 3; m++)
        for (size_t i = 0; i < sizeof everywhere / sizeof *everywhere; i++) {
            enum ui_action a = keymap_lookup(focus_modes[m], everywhere[i].key);
            if (a != everywhere[i].action) {
                char name[32];
                printf("#   %s: key %s gives %s, expected %s\n", km_mode_name(focus_modes[m]),
                       keymap_key_name(everywhere[i].key, name, sizeof name),
                       ui_action_name(a), ui_action_name(everywhere[i].action));
                CHECK(0);
            }
        }
}

static void test_enter_per_pane(void)
{
    int enters[] = { '\n', '\r', KEY_ENTER };
    for (size_t i = 0; i < 3; i++) {
        CHECK_INT(keymap_lookup(KM_RANKS, enters[i]), UI_OPEN);     /* open the rank's log */
        CHECK_INT(keymap_lookup(KM_EVENTS, enters[i]), UI_OPEN);
        CHECK_INT(keymap_lookup(KM_LOG, enters[i]), UI_MAXIMIZE);
        CHECK_INT(keymap_lookup(KM_CHECK, enters[i]), UI_LAUNCH_ANYWAY);
        CHECK_INT(keymap_lookup(KM_SEARCH, enters[i]), UI_TEXT_ACCEPT);
        CHECK_INT(keymap_lookup(KM_CONFIRM, enters[i]), UI_CONFIRM);
    }
}

static void test_modal_states(void)
{
    /* preflight refused: Enter launches anyway, q quits; K and r do nothing yet */
    CHECK_INT(keymap_lookup(KM_CHECK, 'q'), UI_QUIT);
    CHECK_INT(keymap_lookup(KM_CHECK, 'r'), UI_NONE);
    CHECK_INT(keymap_lookup(KM_CHECK, 'K'), UI_NONE);
    CHECK_INT(keymap_lookup(KM_CHECK, KEY_DOWN), UI_DOWN);
    /* help: Esc, q and ? close it, arrows scroll it, other keys are ignored */
    CHECK_INT(keymap_lookup(KM_HELP, ESC), UI_CANCEL);
    CHECK_INT(keymap_lookup(KM_HELP, 'q'), UI_CANCEL);
    CHECK_INT(keymap_lookup(KM_HELP, '?'), UI_CANCEL);
    CHECK_INT(keymap_lookup(KM_HELP, KEY_NPAGE), UI_PAGE_DOWN);
    CHECK_INT(keymap_lookup(KM_HELP, 'r'), UI_NONE);
    /* search input: letters are text, even the ones that are commands elsewhere */
    CHECK_INT(keymap_lookup(KM_SEARCH, 'q'), UI_TEXT_INPUT);
    CHECK_INT(keymap_lookup(KM_SEARCH, 'r'), UI_TEXT_INPUT);
    CHECK_INT(keymap_lookup(KM_SEARCH, ' '), UI_TEXT_INPUT);
    CHECK_INT(keymap_lookup(KM_SEARCH, 0xe9), UI_TEXT_INPUT);   /* é as a code point */
    CHECK_INT(keymap_lookup(KM_SEARCH, ESC), UI_CANCEL);
    CHECK_INT(keymap_lookup(KM_SEARCH, KEY_BACKSPACE), UI_TEXT_DELETE);
    CHECK_INT(keymap_lookup(KM_SEARCH, 127), UI_TEXT_DELETE);
    CHECK_INT(keymap_lookup(KM_SEARCH, 8), UI_TEXT_DELETE);
    CHECK_INT(keymap_lookup(KM_SEARCH, KEY_UP), UI_NONE);
    CHECK_INT(keymap_lookup(KM_SEARCH, 1), UI_NONE);            /* Ctrl-A is not text */
    /* a question: y or Enter yes; n, Esc, q no; a stray r is not a yes */
    CHECK_INT(keymap_lookup(KM_CONFIRM, 'y'), UI_CONFIRM);
    CHECK_INT(keymap_lookup(KM_CONFIRM, 'n'), UI_CANCEL);
    CHECK_INT(keymap_lookup(KM_CONFIRM, ESC), UI_CANCEL);
    CHECK_INT(keymap_lookup(KM_CONFIRM, 'q'), UI_CANCEL);
    CHECK_INT(keymap_lookup(KM_CONFIRM, 'r'), UI_NONE);
    CHECK_INT(keymap_lookup(KM_COUNT, 'q'), UI_NONE);
}

static void test_no_key_bound_twice(void)
{
    size_t n;
    const struct km_binding *t = keymap_table(&n);
    CHECK(n > 40);
    for (int m = 0; m < KM_COUNT; m++)
        for (size_t i = 0; i < n; i++)
            for (size_t k = i + 1; k < n; k++)
                if ((t[i].modes & t[k].modes & KM_BIT(m)) && t[i].key == t[k].key) {
                    char name[32];
                    printf("#   %s: %s bound to %s and %s\n", km_mode_name(m),
                           keymap_key_name(t[i].key, name, sizeof name),
                           ui_action_name(t[i].action), ui_action_name(t[k].action));
                    CHECK(0);
                }
    for (size_t i = 0; i < n; i++) {
        CHECK(t[i].modes != 0);
        CHECK(t[i].help && *t[i].help);
        CHECK(t[i].action > UI_NONE && t[i].action < UI_ACTION_COUNT);
    }
}

/* Whether word appears in line as a whole word (keys are listed separated by spaces). */
static bool has_word(const char *line, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = line; (p = strstr(p, word)); p++) {
        bool start = p == line || p[-1] == ' ';
        bool end = p[wl] == ' ' || p[wl] == '\0';
        if (start && end) return true;
    }
    return false;
}

static void test_help_lists_every_key(void)
{
    size_t n_lines, n;
    char **lines = keymap_help_lines(&n_lines);
    const struct km_binding *t = keymap_table(&n);
    CHECK(lines != NULL);
    CHECK(n_lines > 20);
    for (size_t i = 0; i < n; i++) {
        char name[32];
        keymap_key_name(t[i].key, name, sizeof name);
        bool found = false;
        for (size_t l = 0; l < n_lines && !found; l++)
            found = has_word(lines[l], name) && strstr(lines[l], t[i].help);
        if (!found) {
            printf("#   help does not list %s (%s)\n", name, t[i].help);
            CHECK(0);
        }
    }
    /* and the issue's keys by name */
    const char *must[] = { "r", "K", "s", "/", "n", "N", "e", "f", "a", "g", "L", "t", "?", "q",
                           "Tab", "Enter", "PgUp", "PgDn", "Home", "End", "Esc", "j", "k" };
    for (size_t i = 0; i < sizeof must / sizeof *must; i++) {
        bool found = false;
        for (size_t l = 0; l < n_lines && !found; l++) found = has_word(lines[l], must[i]);
        if (!found) printf("#   help lacks %s\n", must[i]);
        CHECK(found);
    }
    keymap_help_free(lines, n_lines);
}

static void test_key_names(void)
{
    char b[32];
    CHECK_STR(keymap_key_name(KEY_UP, b, sizeof b), "Up");
    CHECK_STR(keymap_key_name(KEY_NPAGE, b, sizeof b), "PgDn");
    CHECK_STR(keymap_key_name('\n', b, sizeof b), "Enter");
    CHECK_STR(keymap_key_name(KEY_F(1), b, sizeof b), "F1");
    CHECK_STR(keymap_key_name(12, b, sizeof b), "Ctrl-L");
    CHECK_STR(keymap_key_name('K', b, sizeof b), "K");
    CHECK_STR(keymap_key_name(ESC, b, sizeof b), "Esc");
    for (int a = 0; a < UI_ACTION_COUNT; a++) CHECK(ui_action_name(a) != NULL);
    CHECK(ui_action_name(UI_ACTION_COUNT) == NULL);
}

static void test_controller_actions_and_confirm(void)
{
    CHECK_INT(ui_action_controller(UI_RESTART), ACT_RESTART);
    CHECK_INT(ui_action_controller(UI_STOP), ACT_STOP);
    CHECK_INT(ui_action_controller(UI_QUIT), ACT_QUIT);
    CHECK_INT(ui_action_controller(UI_STACKS), ACT_STACKS);
    CHECK_INT(ui_action_controller(UI_LAUNCH_ANYWAY), ACT_LAUNCH_ANYWAY);
    CHECK_INT(ui_action_controller(UI_GRID), ACT_NONE);
    /* r asks while the job runs (stalled ranks still run), not after it failed or ended */
    CHECK(ui_action_needs_confirm(UI_RESTART, JOB_RUNNING, 4));
    CHECK(ui_action_needs_confirm(UI_RESTART, JOB_STALLED, 4));
    CHECK(!ui_action_needs_confirm(UI_RESTART, JOB_FAILED, 0));
    CHECK(!ui_action_needs_confirm(UI_RESTART, JOB_DONE, 0));
    /* q asks while ranks run */
    CHECK(ui_action_needs_confirm(UI_QUIT, JOB_RUNNING, 1));
    CHECK(!ui_action_needs_confirm(UI_QUIT, JOB_DONE, 0));
    CHECK(!ui_action_needs_confirm(UI_QUIT, JOB_CHECK_FAILED, 0));
    CHECK(!ui_action_needs_confirm(UI_STACKS, JOB_RUNNING, 8));
    CHECK(ui_action_confirm_text(UI_RESTART) != NULL);
    CHECK(ui_action_confirm_text(UI_QUIT) != NULL);
    CHECK(ui_action_confirm_text(UI_GRID) == NULL);
}

/* d detaches a session's terminal from every pane and from the preflight; in a question it
 * is the quit question's third answer, which quits like y when confirmed. */
static void test_detach_key(void)
{
    for (size_t m = 0; m < 3; m++) CHECK_INT(keymap_lookup(focus_modes[m], 'd'), UI_DETACH);
    CHECK_INT(keymap_lookup(KM_CHECK, 'd'), UI_DETACH);
    CHECK_INT(keymap_lookup(KM_CONFIRM, 'd'), UI_DETACH);
    CHECK_INT(keymap_lookup(KM_SEARCH, 'd'), UI_TEXT_INPUT);    /* typed into a search */
    CHECK_INT(ui_action_controller(UI_QUIT_OR_DETACH), ACT_QUIT);
    CHECK_INT(ui_action_controller(UI_DETACH), ACT_NONE);
    const char *q = ui_action_confirm_text(UI_QUIT_OR_DETACH);
    CHECK(q && strstr(q, "y/n") && strstr(q, "d detaches"));
}

int main(void)
{
    RUN(test_issue_keys_in_every_pane);
    RUN(test_enter_per_pane);
    RUN(test_modal_states);
    RUN(test_no_key_bound_twice);
    RUN(test_help_lists_every_key);
    RUN(test_key_names);
    RUN(test_controller_actions_and_confirm);
    RUN(test_detach_key);
    return tap_done();
}
