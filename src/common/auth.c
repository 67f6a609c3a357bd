/* auth.c — the shared-secret handshake of auth.h (OpenSSL's HMAC and RNG). */
#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

#include "common/common.h"

int sl_auth_hello_make(sl_auth_hello_t *h, int kind, int role, uint8_t out[SL_AUTH_HELLO_LEN]) {
    h->kind = (uint8_t)kind;
    h->role = (uint8_t)role;
    if (RAND_bytes(h->nonce, sizeof h->nonce) != 1) return SL_EIO;
    uint32_t magic = SL_AUTH_MAGIC;
    uint16_t version = SL_AUTH_VERSION;
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(magic >> (8 * i));
    out[4] = (uint8_t)version;
    out[5] = (uint8_t)(version >> 8);
    out[6] = h->kind;
    out[7] = h->role;
    memcpy(out + 8, h->nonce, sizeof h->nonce);
    return 0;
}

int sl_auth_hello_parse(const uint8_t in[SL_AUTH_HELLO_LEN], int my_role, sl_auth_hello_t *h, char *err,
                        size_t errlen) {
    uint32_t magic = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
    unsigned version = (unsigned)in[4] | (unsigned)in[5] << 8;
    if (magic != SL_AUTH_MAGIC)
        return sl_errf(err, errlen, SL_EFORMAT, "handshake: not a sluice peer (magic 0x%08x)", magic);
    if (version != SL_AUTH_VERSION)
        return sl_errf(err, errlen, SL_EFORMAT, "handshake: peer speaks version %u, this build %u", version,
                       SL_AUTH_VERSION);
    if (in[6] < SL_AUTH_CONTROL || in[6] > SL_AUTH_ARTIFACT)
        return sl_errf(err, errlen, SL_EFORMAT, "handshake: unknown connection kind %u", in[6]);
    if (in[7] > 1 || in[7] == my_role)
        return sl_errf(err, errlen, SL_EFORMAT, "handshake: peer claims role %u", in[7]);
    h->kind = in[6];
    h->role = in[7];
    memcpy(h->nonce, in + 8, sizeof h->nonce);
    return 0;
}

static void proof_of(const char *secret, const sl_auth_hello_t *from, const sl_auth_hello_t *to,
                     uint8_t out[SL_AUTH_PROOF_LEN]) {
    uint8_t msg[11 + 2 + 64];
    memcpy(msg, "sluice-auth", 11);
    msg[11] = from->kind;
    msg[12] = from->role;
    memcpy(msg + 13, from->nonce, 32);
    memcpy(msg + 45, to->nonce, 32);
    unsigned len = SL_AUTH_PROOF_LEN;
    const char *key = secret ? secret : "";
    HMAC(EVP_sha256(), key, (int)strlen(key), msg, sizeof msg, out, &len);
}

void sl_auth_proof(const char *secret, const sl_auth_hello_t *self, const sl_auth_hello_t *peer,
                   uint8_t out[SL_AUTH_PROOF_LEN]) {
    proof_of(secret, self, peer, out);
}

bool sl_auth_check(const char *secret, const sl_auth_hello_t *self, const sl_auth_hello_t *peer,
                   const uint8_t proof[SL_AUTH_PROOF_LEN]) {
    uint8_t want[SL_AUTH_PROOF_LEN];
    proof_of(secret, peer, self, want);
    return CRYPTO_memcmp(want, proof, SL_AUTH_PROOF_LEN) == 0;
}
