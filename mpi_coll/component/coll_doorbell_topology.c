/*
 * Where ranks sit: nodes from host names (or, for tests, every k
 * consecutive ranks, named "node<k>"), leaves from a map of host -> leaf
 * switch: the MCA parameter coll_doorbell_leaves
 * ("hostA:leaf1,hostB:leaf1,hostC:leaf2") or the file named by
 * coll_doorbell_topology_file (one "<host> <leaf>" per line, # comments).
 * Without a map, or when a host is missing from it, nodes are the only
 * level. Every rank must see the same map.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOORBELL_MAX_LEAF_ENTRIES 4096
#define DOORBELL_NAME_LEN         64

typedef struct {
    char host[DOORBELL_NAME_LEN];
    char leaf[DOORBELL_NAME_LEN];
} mca_coll_doorbell_leaf_entry_t;

/* Splits `text` into words (separators: space, tab, newline, ',', ':', '=');
 * '#' starts a comment to the end of the line. Pairs consecutive words. */
static int parse_leaf_map(const char *text, mca_coll_doorbell_leaf_entry_t *map,
                          int max)
{
    char        word[2][DOORBELL_NAME_LEN];
    int         n = 0, w = 0;
    size_t      len;
    const char *p = text;

    while (*p != '\0') {
        if (*p == '#') {
            while (*p != '\0' && *p != '\n') {
                p++;
            }
            continue;
        }
        if (isspace((unsigned char)*p) || *p == ',' || *p == ':' || *p == '=') {
            p++;
            continue;
        }
        len = 0;
        while (*p != '\0' && !isspace((unsigned char)*p) && *p != ',' &&
               *p != ':' && *p != '=' && *p != '#') {
            if (len < DOORBELL_NAME_LEN - 1) {
                word[w][len++] = *p;
            }
            p++;
        }
        word[w][len] = '\0';
        if (++w == 2) {
            if (n == max) {
                return -1;
            }
            memcpy(map[n].host, word[0], sizeof(word[0]));
            memcpy(map[n].leaf, word[1], sizeof(word[1]));
            n++;
            w = 0;
        }
    }
    return w == 0 ? n : -1;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long  len;

    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || len > (1 << 22) ||
        fseek(f, 0, SEEK_SET) != 0 || (buf = malloc(len + 1)) == NULL) {
        fclose(f);
        return NULL;
    }
    len      = (long)fread(buf, 1, len, f);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

int mca_coll_doorbell_topology(mca_coll_doorbell_module_t *module,
                               const char *hostnames, size_t stride,
                               int *node_of, int *leaf_of, int *have_leaves_p)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    int n = ompi_comm_size(module->comm), k = cm->emulate_ranks_per_node;
    mca_coll_doorbell_leaf_entry_t *map;
    char(*names)[DOORBELL_NAME_LEN];
    const char **leaf_names = NULL;
    char        *text       = NULL;
    int          i, j, entries, leaves = 0;

    names = calloc(n, sizeof(*names));
    if (names == NULL) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    /* Nodes: the first rank with a name gives the node its id. */
    for (i = 0; i < n; i++) {
        if (k > 0) {
            snprintf(names[i], sizeof(names[i]), "node%d", i / k);
        } else {
            snprintf(names[i], sizeof(names[i]), "%s", hostnames + i * stride);
        }
        node_of[i] = i;
        for (j = 0; j < i; j++) {
            if (strcmp(names[i], names[j]) == 0) {
                node_of[i] = node_of[j];
                break;
            }
        }
    }

    *have_leaves_p = 0;
    if (cm->leaves != NULL && cm->leaves[0] != '\0') {
        text = strdup(cm->leaves);
    } else if (cm->topology_file != NULL && cm->topology_file[0] != '\0') {
        text = read_file(cm->topology_file);
        if (text == NULL) {
            DOORBELL_ERROR("cannot read coll_doorbell_topology_file %s; no leaf "
                           "level",
                           cm->topology_file);
        }
    }
    if (text == NULL) {
        free(names);
        return OMPI_SUCCESS;
    }
    map     = calloc(DOORBELL_MAX_LEAF_ENTRIES, sizeof(*map));
    entries = map ? parse_leaf_map(text, map, DOORBELL_MAX_LEAF_ENTRIES) : -1;
    free(text);
    if (entries < 0) {
        DOORBELL_ERROR("leaf map is malformed (expected host/leaf pairs); no "
                       "leaf level");
        goto out;
    }
    /* Each rank's leaf name, then ids by first appearance. */
    leaf_names = calloc(n, sizeof(*leaf_names));
    if (leaf_names == NULL) {
        goto out;
    }
    for (i = 0; i < n; i++) {
        for (j = 0; j < entries && leaf_names[i] == NULL; j++) {
            if (strcmp(map[j].host, names[i]) == 0) {
                leaf_names[i] = map[j].leaf;
            }
        }
        if (leaf_names[i] == NULL) {
            DOORBELL_VERBOSE(1,
                             "host %s of rank %d is not in the leaf map; no "
                             "leaf level",
                             names[i], i);
            goto out;
        }
        leaf_of[i] = leaves;
        for (j = 0; j < i; j++) {
            if (strcmp(leaf_names[j], leaf_names[i]) == 0) {
                leaf_of[i] = leaf_of[j];
                break;
            }
        }
        if (leaf_of[i] == leaves) {
            leaves++;
        }
    }
    *have_leaves_p = 1;
out:
    free(leaf_names);
    free(map);
    free(names);
    return OMPI_SUCCESS;
}
