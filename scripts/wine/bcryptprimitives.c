/* bcryptprimitives.dll for Wine 8 (Debian 12's), which lacks it: Rust's
 * standard library (1.78 and later) takes its random bytes from its
 * ProcessPrng, which Windows 10 and later export. This stand-in serves
 * them from RtlGenRandom (advapi32's SystemFunction036), as Wine 9 does.
 * Used only to run Windows test binaries under Wine (scripts/wine.sh);
 * never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
