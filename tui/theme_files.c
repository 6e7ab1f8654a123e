/* Themes, part 3: reading *.theme files, the directories they are looked up in (the user's
 * config, the themes/ folder next to the build or install, /usr/share), and the list of
 * names the `t` key cycles through. */
#include "theme.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

#define THEME_MAX_BYTES (256 * 1024)

/* The order shipped themes come in for `t`; others follow alphabetically. */
static const char *const shipped[] = { "default", "light", "high-contrast", "mono" };

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int theme_load_file(struct theme *t, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the theme: %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(THEME_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    size_t n = fread(buf, 1, THEME_MAX_BYTES + 1, f);
    int rd_err = ferror(f);
    fclose(f);
    if (rd_err || n > THEME_MAX_BYTES) {
        snprintf(err, errlen, "%s: %s", path, rd_err ? "cannot read the theme"
                 : "larger than 256 KiB: not a theme file");
        free(buf);
        return -1;
    }
    theme_init_default(t);
    int rc = theme_parse(t, buf, n, path, err, errlen);
    free(buf);
    if (rc < 0) return -1;
    /* name: the base name without .theme */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strlen(base);
    if (bl > 6 && strcmp(base + bl - 6, ".theme") == 0) bl -= 6;
    if (bl >= sizeof t->name) bl = sizeof t->name - 1;
    memcpy(t->name, base, bl);
    t->name[bl] = '\0';
    return 0;
}

static void add_dir(struct theme_dirs *d, const char *a, const char *b)
{
    if (d->n >= THEME_MAX_DIRS || !a || !*a) return;
    size_t n = strlen(a) + strlen(b) + 1;
    char *p = malloc(n);
    if (!p) return;
    snprintf(p, n, "%s%s", a, b);
    d->dir[d->n++] = p;
}

void theme_dirs_init(struct theme_dirs *d, const char *xdg_config_home, const char *home,
                     const char *exe_path)
{
    memset(d, 0, sizeof *d);
    if (!xdg_config_home) xdg_config_home = getenv("XDG_CONFIG_HOME");
    if (!home) home = getenv("HOME");
    /* XDG: an empty or relative XDG_CONFIG_HOME is to be ignored */
    if (xdg_config_home && xdg_config_home[0] == '/')
        add_dir(d, xdg_config_home, "/ddptop/themes");
    else if (home && *home)
        add_dir(d, home, "/.config/ddptop/themes");

    if (exe_path) {
        char exe[PATH_MAX];
        snprintf(exe, sizeof exe, "%s", exe_path);
        add_dir(d, dirname(exe), "/../themes");
        snprintf(exe, sizeof exe, "%s", exe_path);
        add_dir(d, dirname(exe), "/../share/ddptop/themes");
    } else {
        char *beside = util_exe_sibling("../themes");
        char *installed = util_exe_sibling("../share/ddptop/themes");   /* make install's */
        add_dir(d, beside, "");
        add_dir(d, installed, "");
        free(beside);
        free(installed);
    }
    add_dir(d, "/usr/share/ddptop/themes", "");
}

void theme_dirs_done(struct theme_dirs *d)
{
    for (size_t i = 0; i < d->n; i++) free(d->dir[i]);
    memset(d, 0, sizeof *d);
}

static bool valid_name(const char *name)
{
    if (!*name || strlen(name) > 60) return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return false;
    return name[0] != '.';
}

int theme_load(struct theme *t, const char *name, const struct theme_dirs *d,
               char *err, size_t errlen)
{
    if (strchr(name, '/')) return theme_load_file(t, name, err, errlen);
    if (!valid_name(name)) {
        snprintf(err, errlen, "--theme '%s': a theme name is letters, digits, '-', '_' and "
                 "'.' (or give a path to a .theme file)", name);
        return -1;
    }
    char path[PATH_MAX];
    for (size_t i = 0; d && i < d->n; i++) {
        snprintf(path, sizeof path, "%s/%s.theme", d->dir[i], name);
        if (access(path, F_OK) == 0) return theme_load_file(t, path, err, errlen);
    }
    if (strcmp(name, "default") == 0) {
        theme_init_default(t);
        return 0;
    }
    size_t n_names = 0;
    char **names = theme_names(d, &n_names);
    int o = snprintf(err, errlen, "--theme '%s': no %s.theme in", name, name);
    for (size_t i = 0; d && i < d->n && o >= 0 && (size_t)o < errlen; i++)
        o += snprintf(err + o, errlen - (size_t)o, "%s %s", i ? "," : "", d->dir[i]);
    for (size_t i = 0; i < n_names && o >= 0 && (size_t)o < errlen; i++)
        o += snprintf(err + o, errlen - (size_t)o, "%s%s", i ? ", " : "; themes: ", names[i]);
    theme_names_free(names, n_names);
    return -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool has_name(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0) return true;
    return false;
}

/* Appends to *v (grown as needed); false when out of memory. */
static bool push(char ***v, size_t *n, size_t *cap, const char *s)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return false;
        *v = nv;
        *cap = nc;
    }
    char *c = dup_str(s);
    if (!c) return false;
    (*v)[(*n)++] = c;
    return true;
}

char **theme_names(const struct theme_dirs *d, size_t *n)
{
    char **found = NULL, **out = NULL;
    size_t nf = 0, capf = 0, no = 0, capo = 0;
    for (size_t i = 0; d && i < d->n; i++) {
        DIR *dir = opendir(d->dir[i]);
        if (!dir) continue;
        for (struct dirent *e; (e = readdir(dir));) {
            size_t l = strlen(e->d_name);
            if (l <= 6 || strcmp(e->d_name + l - 6, ".theme") != 0) continue;
            char nm[256];
            snprintf(nm, sizeof nm, "%.*s", (int)(l - 6), e->d_name);
            if (valid_name(nm) && !has_name(found, nf, nm)) push(&found, &nf, &capf, nm);
        }
        closedir(dir);
    }
    for (size_t i = 0; i < sizeof shipped / sizeof *shipped; i++)
        if (i == 0 || has_name(found, nf, shipped[i])) push(&out, &no, &capo, shipped[i]);
    if (nf) qsort(found, nf, sizeof *found, cmp_str);
    for (size_t i = 0; i < nf; i++)
        if (!has_name(out, no, found[i])) push(&out, &no, &capo, found[i]);
    theme_names_free(found, nf);
    *n = no;
    return out;
}

void theme_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

char *theme_next_name(const struct theme_dirs *d, const char *current, char *buf, size_t n)
{
    size_t count = 0;
    char **names = theme_names(d, &count);
    size_t next = 0;
    for (size_t i = 0; i < count; i++)
        if (current && strcmp(names[i], current) == 0) next = (i + 1) % count;
    snprintf(buf, n, "%s", count ? names[next] : "default");
    theme_names_free(names, count);
    return buf;
}
