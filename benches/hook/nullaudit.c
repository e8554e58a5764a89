/*
 * nullaudit: the smallest audit module that uses libc. It accepts the interface, asks for no
 * binding callbacks, and calls getenv (never true) so that libc is really needed: the loader
 * then gives it its own copy of libc in the audit namespace, as it does any audit module that
 * uses libc. hookbench runs it beside libamvgpu.so to show what that alone costs at start-up.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

unsigned int la_version(unsigned int version) { return version < 2 ? version : 2; }

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
    (void)map;
    (void)lmid;
    (void)cookie;
    if (getenv("NULLAUDIT_NEVER_SET") != NULL) puts("nullaudit");
    return 0;
}
