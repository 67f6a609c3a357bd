/*
 * config_api.c — the life cycle of a heap configuration (sluice/config.h's
 * sl_config_new / sl_config_destroy) and sl_env_configure, which applies one
 * to an environment with its problems reported as the environment's error.
 * Parsing, the key table and the getters are in config.c.
 */
#include "common/common.h"
#include "config/config.h"
#include "graph/stream_graph.h"
#include "sluice/config.h"

sl_config_t *sl_config_new(void) {
    sl_config_t *cfg = sl_calloc(1, sizeof *cfg);
    sl_config_defaults(cfg);
    return cfg;
}

void sl_config_destroy(sl_config_t *cfg) {
    if (!cfg) return;
    sl_config_free(cfg);
    sl_free(cfg);
}

int sl_env_configure(sl_env_t *env, const sl_config_t *cfg) {
    char err[2048];
    if (!env) return SL_EINVAL;
    if (!cfg) {
        sl_env_errorf(env, "sl_env_configure: no configuration given");
        return SL_EINVAL;
    }
    if (sl_config_validate(cfg, err, sizeof err) < 0 || sl_config_apply_env(cfg, env, err, sizeof err) < 0) {
        sl_env_errorf(env, "configuration: %s", err);
        return SL_EINVAL;
    }
    return 0;
}
