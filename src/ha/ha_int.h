/* ha_int.h — what the files of src/ha/ share beyond ha_services.h. */
#ifndef SL_HA_INT_H
#define SL_HA_INT_H

#include "ha/ha_services.h"

/* The latch znode's name (256 bytes) and the token (33 bytes) of ha. */
char *sl_ha_latch_name_(sl_ha_t *ha);
char *sl_ha_token_(sl_ha_t *ha);

#endif
