/*
 * auth.h — the cluster's shared-secret handshake, one definition for every
 * internal connection (control RPC, data plane, artifact download).
 *
 * After connecting, each side sends a hello:
 *   u32 magic "SLHS" (0x53484c53 little-endian), u16 version (1),
 *   u8 kind (SL_AUTH_CONTROL / SL_AUTH_DATA), u8 role (0 client, 1 server),
 *   32 bytes nonce
 * (40 bytes), then, once it has the peer's hello, its proof:
 *   32 bytes HMAC-SHA256(secret, "sluice-auth" | kind | role | own nonce | peer nonce)
 * Each side checks the peer's proof against the proof the peer must have
 * computed (the peer's role, the peer's nonce first) with a constant-time
 * compare, and closes the connection on any mismatch without saying more.
 * An empty secret still runs the handshake (so kinds and versions are
 * checked), it only proves nothing.
 */
#ifndef SL_AUTH_H
#define SL_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_AUTH_MAGIC 0x53484c53u
#define SL_AUTH_VERSION 1u
#define SL_AUTH_HELLO_LEN 40
#define SL_AUTH_PROOF_LEN 32
enum { SL_AUTH_CONTROL = 1, SL_AUTH_DATA = 2, SL_AUTH_ARTIFACT = 3 };

typedef struct sl_auth_hello {
    uint8_t kind, role;
    uint8_t nonce[32];
} sl_auth_hello_t;

/* Fills h with kind, role and a fresh random nonce (OpenSSL RAND_bytes);
 * writes its 40 wire bytes to out. */
int sl_auth_hello_make(sl_auth_hello_t *h, int kind, int role, uint8_t out[SL_AUTH_HELLO_LEN]);
/* Parses a peer's hello; SL_EFORMAT with a message on a bad magic, a newer
 * version, an unknown kind, or a role equal to `my_role`. */
int sl_auth_hello_parse(const uint8_t in[SL_AUTH_HELLO_LEN], int my_role, sl_auth_hello_t *h, char *err,
                        size_t errlen);
/* The proof `self` sends to `peer` (see above). */
void sl_auth_proof(const char *secret, const sl_auth_hello_t *self, const sl_auth_hello_t *peer,
                   uint8_t out[SL_AUTH_PROOF_LEN]);
/* True when `proof` is the one `peer` must send to `self`. */
bool sl_auth_check(const char *secret, const sl_auth_hello_t *self, const sl_auth_hello_t *peer,
                   const uint8_t proof[SL_AUTH_PROOF_LEN]);

#endif
