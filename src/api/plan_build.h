/*
 * plan_build.h — turns an environment's stream graph into a job plan and
 * the table of user code it names (plan_build.c).
 */
#ifndef SL_PLAN_BUILD_H
#define SL_PLAN_BUILD_H

#include "api/env_int.h"
#include "plan/job_code.h"
#include "plan/plan.h"

/* Chains the graph (refusing a bad one by name) and fills *plan (new;
 * sl_plan_free + sl_free) and *code (sl_job_code_free; it points into env,
 * which must outlive it). */
int sl_plan_build(const sl_env_t *env, const char *job_name, sl_plan_t **plan, sl_job_code_t *code, char *err,
                  size_t errlen);

#endif
