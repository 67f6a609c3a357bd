/*
 * cluster.c — what `sluice jobmanager` (jobmanager_cmd.c) and `sluice
 * taskmanager` (taskmanager_cmd.c) share: options, the wait for a signal.
 * The cluster's processes run in the foreground, logging to stderr, until
 * SIGTERM or SIGINT.  The two commands are wiring: each gives its side
 * (jobmanager/dispatcher.h, taskmanager/tm_process.h) the job loader
 * (runtime/job_loader.h), which runs the job's builder in that process;
 * neither sees the other side.
 *
 *   sluice jobmanager [--config FILE] [-D key=value ...]
 *   sluice taskmanager [--config FILE] [-D key=value ...] [--id ID]
 *
 * Keys (Flink's): jobmanager.rpc.address / .port, rest.bind-address,
 * rest.port, taskmanager.numberOfTaskSlots, taskmanager.host,
 * taskmanager.data.port, heartbeat.interval, heartbeat.timeout,
 * slot.request.timeout, security.internal.secret.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cluster.h"
#include "common/common.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { (void)sig, g_stop = 1; }

/* --config / -D / --id; 0, or 2 after a message. */
int sl_cli_cluster_parse(const char *cmd, int argc, char **argv, sl_config_t *cfg, const char **id) {
    char err[2048];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--config") && v) {
            if (sl_config_load_file(cfg, v, err, sizeof err) < 0) {
                fprintf(stderr, "sluice %s: %s\n", cmd, err);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "-D") && v) {
            char key[256];
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof key) {
                fprintf(stderr, "sluice %s: -D %s: expected key=value\n", cmd, v);
                return 2;
            }
            snprintf(key, sizeof key, "%.*s", (int)(eq - v), v);
            if (sl_config_set(cfg, key, eq + 1, err, sizeof err) < 0) {
                fprintf(stderr, "sluice %s: %s\n", cmd, err);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--id") && v && id) {
            *id = v;
            i++;
        } else {
            fprintf(stderr, "sluice %s: unknown option '%s' (usage: sluice %s [--config FILE] [-D key=value]%s)\n",
                    cmd, a, cmd, id ? " [--id ID]" : "");
            return 2;
        }
    }
    if (sl_config_validate(cfg, err, sizeof err) < 0) {
        fprintf(stderr, "sluice %s: %s\n", cmd, err);
        return 2;
    }
    sl_config_apply_s3(cfg); /* s3:// checkpoint storage: this process's endpoint and credentials */
    return 0;
}

const char *sl_cli_host(const char *h) { return !h || !strcmp(h, "localhost") ? "127.0.0.1" : h; }

void sl_cli_wait_for_signal(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    while (!g_stop) pause();
}

