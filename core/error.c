/* core/error.c: names and sentences for ntbfab error codes and errno values. */
#include <stdio.h>
#include <string.h>

#include "ntbfab/error.h"

const char *ntbf_strerror(int err)
{
        switch (err) {
#define NTBF_E_TEXT(name, value, text)                                                             \
        case NTBF_E##name:                                                                         \
                return text;
                NTBF_ERRNO_MAP(NTBF_E_TEXT)
#undef NTBF_E_TEXT
        case 0:
                return "success";
        default:
                break;
        }
        if (err < 0 && err > -4000)
                return strerror(-err);
        return "unknown error";
}

const char *ntbf_err_name(int err)
{
        switch (err) {
#define NTBF_E_NAME(name, value, text)                                                             \
        case NTBF_E##name:                                                                         \
                return "NTBF_E" #name;
                NTBF_ERRNO_MAP(NTBF_E_NAME)
#undef NTBF_E_NAME
        case 0:
                return "OK";
        default:
                break;
        }
        if (err < 0 && err > -4000) {
                const char *name = strerrorname_np(-err);
                if (name)
                        return name;
        }
        return "UNKNOWN";
}
