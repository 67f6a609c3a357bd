/*
 * prom.c — the Prometheus endpoint (prom.h): an HTTP server on the first
 * free port of a range, answering GET /metrics with the text exposition
 * format, and the helpers that write that format.
 */
#include "metrics/prom.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sl_prom_server {
    struct MHD_Daemon *d;
    int port;
    sl_prom_render_fn fn;
    void *ctx;
};

int sl_prom_parse_ports(const char *spec, int *lo, int *hi, char *err, size_t errlen) {
    char *end;
    if (!spec || !*spec) return sl_errf(err, errlen, SL_EINVAL, "metrics.reporter.prom.port is empty");
    long a = strtol(spec, &end, 10), b = a;
    if (end != spec && *end == '-') {
        const char *p = end + 1;
        b = strtol(p, &end, 10);
        if (end == p) b = -1;
    }
    if (end == spec || *end || a < 1 || a > 65535 || b < a || b > 65535)
        return sl_errf(err, errlen, SL_EINVAL,
                       "metrics.reporter.prom.port '%s' is not a port or a range like 9249-9260 (1..65535)", spec);
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls) {
    sl_prom_server_t *s = cls;
    SL_UNUSED(version); SL_UNUSED(upload_data); SL_UNUSED(con_cls);
    if (*upload_data_size) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    unsigned status = MHD_HTTP_OK;
    sl_buf_t b = {0};
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
        sl_buf_append(&b, "only GET\n", 9);
    } else if (strcmp(url, "/metrics") && strcmp(url, "/")) {
        status = MHD_HTTP_NOT_FOUND;
        sl_buf_append(&b, "not found: try /metrics\n", 24);
    } else {
        s->fn(s->ctx, &b);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.p ? b.p : (void *)"", MHD_RESPMEM_MUST_COPY);
    sl_buf_free(&b);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

int sl_prom_server_new(const char *bind_address, const char *spec, sl_prom_render_fn fn, void *ctx,
                       sl_prom_server_t **out, char *err, size_t errlen) {
    *out = NULL;
    int lo, hi, rc = sl_prom_parse_ports(spec, &lo, &hi, err, errlen);
    if (rc) return rc;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    const char *bind = bind_address ? bind_address : "0.0.0.0";
    if (inet_pton(AF_INET, bind, &sa.sin_addr) != 1)
        return sl_errf(err, errlen, SL_EINVAL, "prometheus: '%s' is not an IPv4 address", bind);
    sl_prom_server_t *s = sl_calloc(1, sizeof *s);
    s->fn = fn;
    s->ctx = ctx;
    int e = 0;
    for (int port = lo; port <= hi && !s->d; port++) {
        sa.sin_port = htons((uint16_t)port);
        s->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, answer, s, MHD_OPTION_SOCK_ADDR,
                                (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)32, MHD_OPTION_END);
        if (s->d) s->port = port;
        else e = errno;
    }
    if (!s->d) {
        sl_free(s);
        return sl_errf(err, errlen, SL_EIO, "prometheus: no free port in %d-%d on %s (last: %s)", lo, hi, bind,
                       strerror(e ? e : EADDRINUSE));
    }
    *out = s;
    return 0;
}

int sl_prom_server_port(const sl_prom_server_t *s) { return s->port; }

void sl_prom_server_destroy(sl_prom_server_t *s) {
    if (!s) return;
    if (s->d) MHD_stop_daemon(s->d);
    sl_free(s);
}

void sl_prom_escape(sl_buf_t *out, const char *v) {
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\') sl_buf_append(out, "\\\\", 2);
        else if (*p == '"') sl_buf_append(out, "\\\"", 2);
        else if (*p == '\n') sl_buf_append(out, "\\n", 2);
        else sl_buf_append(out, p, 1);
    }
}

void sl_prom_type(sl_buf_t *out, const char *name) {
    char line[300];
    int n = snprintf(line, sizeof line, "# TYPE %s gauge\n", name);
    if (n > 0) sl_buf_append(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void sl_prom_sample(sl_buf_t *out, const char *name, const char *const *labels, int nlabels, double value) {
    sl_buf_append(out, name, strlen(name));
    for (int i = 0; i < nlabels; i++) {
        sl_buf_append(out, i ? "," : "{", 1);
        sl_buf_append(out, labels[2 * i], strlen(labels[2 * i]));
        sl_buf_append(out, "=\"", 2);
        sl_prom_escape(out, labels[2 * i + 1]);
        sl_buf_append(out, "\"", 1);
    }
    if (nlabels) sl_buf_append(out, "}", 1);
    char v[48];
    int n;
    if (isnan(value)) n = snprintf(v, sizeof v, " NaN\n");
    else if (isinf(value)) n = snprintf(v, sizeof v, value > 0 ? " +Inf\n" : " -Inf\n");
    else if (value == (double)(int64_t)value && fabs(value) < 9e15) n = snprintf(v, sizeof v, " %lld\n", (long long)value);
    else n = snprintf(v, sizeof v, " %.17g\n", value);
    sl_buf_append(out, v, (size_t)n);
}
