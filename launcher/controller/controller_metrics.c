/* --metrics: the OpenMetrics endpoint on the controller's loop (docs/integrations.md,
 * "Prometheus"). A leaf of the controller's layers (controller_int.h): the server
 * (openmetrics/http_serve.c) answers from the loop's turns without ever waiting, and its body
 * is the job model as it is between two passes, rendered by openmetrics/openmetrics.c, which
 * only reads it. Nothing here calls the rest of the controller. */
#include "controller_int.h"

#include "openmetrics/http_serve.h"
#include "openmetrics/om_text.h"
#include "openmetrics/openmetrics.h"
#include "util/util.h"

static void render(void *ctx, struct strbuf *body)
{
    const struct controller *c = ctx;
    openmetrics_render(c->job, mono_ms(), body);
}

int ctl_metrics_open(struct controller *c, char *err, size_t errlen)
{
    if (!c->o.metrics_addr) return 0;
    struct http_serve_opts o = {
        .path = "/metrics", .content_type = OM_CONTENT_TYPE, .render = render, .ctx = c,
    };
    c->om_serve = http_serve_open(c->el, c->o.metrics_addr, &o, err, errlen);
    return c->om_serve ? 0 : -1;
}

void ctl_metrics_announce(struct controller *c)
{
    if (!c->om_serve) return;
    /* into the events (and events.jsonl): with port 0 it says which port */
    job_event_add(c->job, EV_INFO, -1, -1, "metrics: OpenMetrics at %s%s", http_serve_url(c->om_serve),
                  http_serve_loopback(c->om_serve) ? "" : " (not loopback: anyone who reaches this address can read "
                                                         "the run's metrics)");
}

void ctl_metrics_close(struct controller *c)
{
    http_serve_free(c->om_serve);
    c->om_serve = NULL;
}
