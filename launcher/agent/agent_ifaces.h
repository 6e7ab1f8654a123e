/* Network interfaces and InfiniBand ports as the agent reports them in facts (the `nccl` check
 * matches NCCL_SOCKET_IFNAME against these). */
#ifndef DDPTOP_AGENT_IFACES_H
#define DDPTOP_AGENT_IFACES_H

#include <cJSON.h>

/* [{"name":"eth0","up":true,"operstate":"up","loopback":false,"ipv4":["10.0.0.2/24"],
 *   "ipv6":["fe80::1/64"],"mtu":1500,"speed_mbps":25000}, ...] in the kernel's order. */
cJSON *agent_ifaces_list(void);
/* [{"name":"mlx5_0","port":1,"state":"ACTIVE","rate":"200 Gb/sec","link_layer":"InfiniBand"}]
 * from /sys/class/infiniband (sysfs_root: normally "/sys"; tests may point elsewhere). */
cJSON *agent_ifaces_ib(const char *sysfs_root);

#endif
