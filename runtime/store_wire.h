/* Wire constants of the rendezvous store, shared by the client (store.c) and the server
 * (store_server.c). The format itself is described in the banner of store.c. */
#ifndef DDPTOP_STORE_WIRE_H
#define DDPTOP_STORE_WIRE_H

#define STORE_MAGIC        "DDPS"
#define STORE_VERSION      1

/* Hello reply statuses. */
#define STORE_HELLO_OK     0
#define STORE_HELLO_TOKEN  1   /* wrong or missing job token; the server closes */
#define STORE_HELLO_VER    2   /* unknown protocol version; the server closes */

/* Request opcodes. */
#define STORE_OP_SET       1
#define STORE_OP_GET       2
#define STORE_OP_ADD       3
#define STORE_OP_WAIT      4

/* Reply statuses. */
#define STORE_OK           0
#define STORE_TIMEOUT      1   /* body: the key still missing */
#define STORE_ERROR        2   /* body: a message */

#define STORE_MAX_TOKEN    1024
#define STORE_MAX_KEY      4096
#define STORE_MAX_BODY     (16u << 20)   /* values are addresses and counters, not tensors */

#endif
