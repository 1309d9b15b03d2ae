/* daemon/intercept.c: rewriting a borrowed device's config accesses (INTx masked, MSI redirected).
 */
#include "intercept.h"

#define PCI_COMMAND       0x04
#define PCI_INTERRUPT_PIN 0x3d
#define CMD_INTX_DISABLE  0x0400
#define MSI_ADDR_LO       0x4
#define MSI_ADDR_HI       0x8

bool ntbf__icpt_valid(uint32_t off, uint32_t size)
{
        return (size == 1 || size == 2 || size == 4) && off < 4096 && off % size == 0;
}

/* Whether byte b is inside the access (off, size). */
static bool covers(uint32_t off, uint32_t size, uint32_t b)
{
        return b >= off && b < off + size;
}

uint32_t ntbf__icpt_read(const struct ntbf__icpt *ic, uint32_t off, uint32_t size, uint32_t val)
{
        (void)ic;
        if (covers(off, size, PCI_INTERRUPT_PIN))
                val &= ~(UINT32_C(0xff) << 8 * (PCI_INTERRUPT_PIN - off));
        return val;
}

int ntbf__icpt_write(struct ntbf__icpt *ic, uint32_t off, uint32_t size, uint32_t val,
                     struct ntbf__cfgw out[2])
{
        out[0] = (struct ntbf__cfgw){off, size, val};
        /* Interrupt Disable is bit 10 of Command: byte 0x05, bit 2. */
        if (covers(off, size, PCI_COMMAND + 1))
                out[0].val |= UINT32_C(0x04) << 8 * (PCI_COMMAND + 1 - off);
        if (!ic->msi_cap)
                return 1;
        uint32_t lo = ic->msi_cap + MSI_ADDR_LO, hi = ic->msi_cap + MSI_ADDR_HI;
        if (off == lo && size == 4) {
                uint64_t host = val;
                if (host >= ic->host_addr && host < ic->host_addr + ic->size) {
                        uint64_t dev = ic->dev_addr + (host - ic->host_addr);
                        out[0].val = (uint32_t)dev;
                        ic->upper = (uint32_t)(dev >> 32);
                        if (ic->msi64) {
                                out[1] = (struct ntbf__cfgw){hi, 4, ic->upper};
                                return 2;
                        }
                }
                return 1;
        }
        /* The driver writes the upper half (0 on x86): the device keeps the rewritten one. */
        if (ic->msi64 && off == hi && size == 4 && val == 0)
                out[0].val = ic->upper ? ic->upper : (uint32_t)(ic->dev_addr >> 32);
        return 1;
}
