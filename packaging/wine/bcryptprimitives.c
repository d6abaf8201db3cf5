/*
 * bcryptprimitives.dll for Wine 8: Rust's standard library (1.78 and later) gets its random
 * bytes from ProcessPrng in bcryptprimitives.dll, which Windows 10+ has and Wine 8 does not.
 * This shim exports ProcessPrng on top of SystemFunction036 (RtlGenRandom, advapi32), which
 * Wine has. It is only for running rtlab.exe under Wine (CI: .ci/windows-smoke); a Windows user
 * never needs it.
 *
 * Build: x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c
 */
#include <windows.h>

typedef BOOLEAN(WINAPI *gen_random_fn)(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    static gen_random_fn gen_random;
    if (!gen_random) {
        HMODULE advapi = LoadLibraryA("advapi32.dll");
        if (!advapi)
            return FALSE;
        gen_random = (gen_random_fn)(void *)GetProcAddress(advapi, "SystemFunction036");
        if (!gen_random)
            return FALSE;
    }
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!gen_random(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
