/* ddptop's own version: reported by every binary and compared across nodes by `check`. */
#ifndef DDPTOP_VERSION_H
#define DDPTOP_VERSION_H
#define DDPTOP_VERSION "0.1.0"
#endif
