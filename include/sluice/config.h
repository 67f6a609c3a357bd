/*
 * sluice/config.h — a job's configuration: Flink's config.yaml keys (and
 * the job's own keys) read from a file, a string or `-D key=value`
 * settings, read back typed with Flink's value syntax, and applied to an
 * environment.
 *
 *     sl_config_t *cfg = sl_config_new();
 *     sl_config_add_namespace(cfg, "fraud", err, sizeof err); // keys fraud.* are the job's
 *     if (sl_config_load_file(cfg, "config.yaml", err, sizeof err) < 0 ||
 *         sl_config_set_arg(cfg, "parallelism.default=4", err, sizeof err) < 0) {
 *         fprintf(stderr, "%s\n", err);                 // "config.yaml:3: unknown key ..."
 *         ...
 *     }
 *     int64_t window_ms = 5 * 60 * 1000;                // the job's default
 *     if (sl_config_get_duration(cfg, "fraud.window", &window_ms, err, sizeof err) == SL_EINVAL) ...
 *     sl_env_t *env = sl_env_new();
 *     sl_env_configure(env, cfg);                       // parallelism, checkpoints, restarts, state, ...
 *     sl_config_destroy(cfg);                           // env keeps what it needs
 *
 * The file may use flat dotted keys ("execution.checkpointing.interval:
 * 10 s"), nested mappings, or a mix.  Everything is strict: an unknown key
 * (with a "did you mean"), a bad value, a key given twice in one file, or
 * malformed YAML is an error naming the key, the value, what is allowed,
 * and file:line.  Keys under a namespace added with sl_config_add_namespace
 * are the job's: any value is kept as text and checked when the job reads
 * it with a typed getter.  `sluice --help-config` lists the engine's keys.
 *
 * Value syntax (Flink's):
 *   durations  "10 s", "10s", "1 min", "2 h", "1 d", "500 ms"; a bare number
 *              is milliseconds (units d, h, min/m, s, ms, and Flink's long
 *              forms: seconds, minutes, ...).
 *   memory     "32 kb", "64m", "1 g"; a bare number is bytes (units b, k/kb,
 *              m/mb, g/gb, t/tb; powers of 1024).
 *   booleans   true / false (any case).
 *   integers   decimal, optional sign.
 *
 * Errors: functions return 0, or a negative SL_E* code with a message in
 * err (errlen bytes, always NUL-terminated when errlen > 0; several problems
 * of one file one per line): SL_EINVAL (unknown key, bad value, duplicate,
 * rule broken), SL_EFORMAT (malformed YAML), SL_EIO (file unreadable),
 * SL_ENOTFOUND (a getter's key has no value).  None is worth retrying.  A
 * load or set that fails leaves the configuration exactly as it was.
 *
 * Threads: build a configuration on one thread; once built, the getters
 * may be called from any thread at the same time (they only read).
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_config sl_config_t;

/* A new configuration holding the defaults (sluice's, which are Flink's
 * unless `sluice --help-config` says otherwise).  Free with
 * sl_config_destroy.  Never NULL. */
SL_API sl_config_t *sl_config_new(void);

/* Frees cfg and everything it owns.  NULL-safe. */
SL_API void sl_config_destroy(sl_config_t *cfg);

/* Declares keys "<ns>.<anything>" to be the job's own (e.g. "fraud" for
 * fraud.threshold, fraud.window).  Call before loading.  ns must be a dotted
 * name that is not part of the engine's key space ("execution", "state",
 * "pipeline.x", ... are refused).  0 or SL_EINVAL.  Copies ns. */
SL_API int sl_config_add_namespace(sl_config_t *cfg, const char *ns, char *err, size_t errlen);

/* Applies the YAML file at path on top of cfg (later sources override
 * earlier ones).  Messages cite path:line. */
SL_API int sl_config_load_file(sl_config_t *cfg, const char *path, char *err, size_t errlen);

/* Applies YAML text on top of cfg; origin names it in messages (NULL:
 * "<string>"). */
SL_API int sl_config_load_string(sl_config_t *cfg, const char *text, const char *origin, char *err, size_t errlen);

/* Sets one key (flat dotted name, or a deprecated alias Flink accepts)
 * from its text form; overrides any earlier value.  Messages cite "-D". */
SL_API int sl_config_set(sl_config_t *cfg, const char *key, const char *value, char *err, size_t errlen);

/* The same from "key=value", as given after -D on a command line. */
SL_API int sl_config_set_arg(sl_config_t *cfg, const char *key_value, char *err, size_t errlen);

/* Checks the rules that involve several keys (parallelism.default <=
 * pipeline.max-parallelism, unaligned checkpoints need EXACTLY_ONCE, ...).
 * sl_env_configure checks them too. */
SL_API int sl_config_validate(const sl_config_t *cfg, char *err, size_t errlen);

/* Whether key has a value (a default counts).  False for unknown keys. */
SL_API bool sl_config_has(const sl_config_t *cfg, const char *key);

/*
 * Typed getters.  key is an engine key (then it must be read as its own
 * type: parallelism.default with sl_config_get_int, checkpoint interval
 * with sl_config_get_duration, ...) or one under a namespace of the job
 * (its text is parsed with Flink's syntax for the type asked for).
 * Returns 0 and sets *out; SL_ENOTFOUND when the key has no value (*out
 * untouched, so a default stored there beforehand stays); SL_EINVAL for an
 * unknown key, a value that does not parse (the message names the key, the
 * value and where it was set: "config.yaml:7: fraud.window: bad value
 * ..."), or a getter of the wrong type for an engine key.
 */
SL_API int sl_config_get_int(const sl_config_t *cfg, const char *key, int64_t *out, char *err, size_t errlen);
SL_API int sl_config_get_bool(const sl_config_t *cfg, const char *key, bool *out, char *err, size_t errlen);
SL_API int sl_config_get_double(const sl_config_t *cfg, const char *key, double *out, char *err, size_t errlen);
/* A duration in milliseconds. */
SL_API int sl_config_get_duration(const sl_config_t *cfg, const char *key, int64_t *ms, char *err, size_t errlen);
/* A memory size in bytes. */
SL_API int sl_config_get_memory(const sl_config_t *cfg, const char *key, int64_t *bytes, char *err, size_t errlen);
/* The value as text into out (cap bytes; SL_EINVAL if it does not fit).
 * Engine keys give their canonical form ("10 s", "EXACTLY_ONCE"). */
SL_API int sl_config_get_string(const sl_config_t *cfg, const char *key, char *out, size_t cap, char *err,
                                size_t errlen);

/* Applies every engine key of cfg to env (call it before building the job,
 * and before anything the job sets itself, which then wins): parallelism,
 * max parallelism, watermark interval, network buffers, checkpointing,
 * state backend, restart strategy.  A problem (a rule of
 * sl_config_validate, a setting sluice does not implement) becomes env's
 * error (sl_env_error), so sl_env_execute fails naming the key; returns 0
 * or SL_EINVAL.  Copies what it needs: cfg may be destroyed afterwards.
 * Call from the thread that builds the job. */
SL_API int sl_env_configure(sl_env_t *env, const sl_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
