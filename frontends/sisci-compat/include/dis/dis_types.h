/* dis/dis_types.h: the same types for clients that include <dis/dis_types.h>. */
#include "../dis_types.h"
