/* core/presets.c: figures of known adapters and switches (sources in docs/models.md). */
#include <strings.h>

#include "ntbfab/topology.h"

/*
 * Each figure is either from a source named in docs/models.md or an assumption
 * marked there as such. Keep the two in step.
 */
static const struct ntbf_adapter_params adapter_presets[] = {
    {
        /* Dolphin PXH830: PCIe Gen3 x16, PLX PEX8733 (article 7.4.1, 8.6). */
        .model = "pxh830",
        .ports = 2,               /* one x16 link, or two x8 links in a 3-node mesh */
        .window = 256 * NTBF_MiB, /* Dolphin factory default prefetchable BAR */
        .lut_entries = 256,       /* assumption: PLX A-LUT with 256 parts */
        .rid_table = 32,          /* article 8.6 */
        .rid_reserved = 2,        /* article 8.6 */
        .addr_bits = 64,          /* assumption */
        .doorbells = 16,          /* PLX PEX87xx */
        .scratchpads = 8,         /* PLX PEX87xx */
        .messages = 0,
        .dma_channels = 4, /* assumption */
        .hop_ns = 132,     /* article 8.6: PEX8733 worst case */
        .xlat = NTBF_XLAT_OUTBOUND,
    },
    {
        /* Dolphin MXH930: PCIe Gen3 x16, Microchip Switchtec PFX based. */
        .model = "mxh930",
        .ports = 4,               /* assumption */
        .window = 256 * NTBF_MiB, /* Dolphin factory default prefetchable BAR */
        .lut_entries = 512,       /* Switchtec control block lut_entry[512] */
        .rid_table = 256,         /* assumption: switchtec-user req_id_table size */
        .rid_reserved = 2,        /* ntb_hw_switchtec registers 2 RIDs at probe */
        .addr_bits = 64,
        .doorbells = 28,    /* ntb_hw_switchtec */
        .scratchpads = 128, /* ntb_hw_switchtec (emulated in shared memory) */
        .messages = 0,      /* 4 in hardware, used internally */
        .dma_channels = 4,  /* assumption */
        .hop_ns = 170,      /* assumption: the PFX figure of article 8.6 */
        .xlat = NTBF_XLAT_OUTBOUND | NTBF_XLAT_INBOUND,
        .rid_proxy = true,                /* Switchtec: requesters cross as proxy IDs */
        .rid_mask = NTBF_RID_MASK_EXPAND, /* an entry is (RID << 16) | enable: no mask */
    },
    {
        /* Intel Xeon Skylake-SP NTB (ntb_hw_gen3): 2 memory windows, B2B only. */
        .model = "intel-gen3",
        .ports = 1,
        .window = 512 * NTBF_MiB, /* the single-window keys, if a file overrides them */
        .lut_entries = 2,
        /* BAR2 and BAR4, one translation each (assumption: 256 MiB, a BIOS setting); the
         * translated address is aligned to the BAR size, the size is in pages up to the BAR
         * (ntb_hw_gen3's mw_get_align; a limit register shrinks a window). */
        .nwindows = 2,
        .windows = {{.size = 256 * NTBF_MiB, .bar = 2, .size_align = 4 * NTBF_KiB},
                    {.size = 256 * NTBF_MiB, .bar = 4, .size_align = 4 * NTBF_KiB}},
        .rid_table = 0, /* no requester table exposed */
        .rid_reserved = 0,
        .addr_bits = 64,
        .doorbells = 32,
        .scratchpads = 16,
        .messages = 0,
        .dma_channels = 0,
        .hop_ns = 150, /* assumption: no published figure */
        .xlat = NTBF_XLAT_INBOUND,
    },
    {
        /* Intel Xeon Ice Lake / Sapphire Rapids NTB (ntb_hw_gen4). */
        .model = "intel-gen4",
        .ports = 1,
        .window = 512 * NTBF_MiB, /* the single-window keys, if a file overrides them */
        .lut_entries = 2,
        /* BAR2 and BAR4 (assumption: 256 MiB each); addresses aligned to a page (the BAR
         * size on ICX steppings with the erratum: override addr_align there). */
        .nwindows = 2,
        .windows = {{.size = 256 * NTBF_MiB,
                     .bar = 2,
                     .addr_align = 4 * NTBF_KiB,
                     .size_align = 4 * NTBF_KiB},
                    {.size = 256 * NTBF_MiB,
                     .bar = 4,
                     .addr_align = 4 * NTBF_KiB,
                     .size_align = 4 * NTBF_KiB}},
        .rid_table = 0,
        .rid_reserved = 0,
        .addr_bits = 64,
        .doorbells = 32,
        .scratchpads = 16,
        .messages = 0,
        .dma_channels = 0,
        .hop_ns = 150, /* assumption */
        .xlat = NTBF_XLAT_INBOUND,
    },
    {
        /* AMD/Hygon NTB (ntb_hw_amd), two-window parts. */
        .model = "amd-ntb",
        .ports = 1,
        .window = 512 * NTBF_MiB, /* the single-window keys, if a file overrides them */
        .lut_entries = 2,
        /* BAR2 and BAR4 (assumption: 256 MiB each); 4 KiB alignment, up to the BAR. */
        .nwindows = 2,
        .windows = {{.size = 256 * NTBF_MiB,
                     .bar = 2,
                     .addr_align = 4 * NTBF_KiB,
                     .size_align = 4 * NTBF_KiB},
                    {.size = 256 * NTBF_MiB,
                     .bar = 4,
                     .addr_align = 4 * NTBF_KiB,
                     .size_align = 4 * NTBF_KiB}},
        .rid_table = 0,
        .rid_reserved = 0,
        .addr_bits = 64,
        .doorbells = 15,  /* 16, top bit reserved for peer unload */
        .scratchpads = 8, /* 16 shared, 8 per side */
        .messages = 0,
        .dma_channels = 0,
        .hop_ns = 150, /* assumption */
        .xlat = NTBF_XLAT_INBOUND,
    },
    {
        /* Microchip Switchtec PFX NT partition as backends/switchtec programs it (its BAR
         * setup, LUT entries and requester IDs through the switch's GAS; docs/switchtec.md). */
        .model = "switchtec-pfx",
        .ports = 1,              /* one peer partition per NT partition */
        .window = 32 * NTBF_MiB, /* the single-window keys, if a file overrides them */
        .lut_entries = 512,
        /* BAR2 (assumption: 64 MiB; the switch's configuration file sets it): the
         * partition's 512 LUT entries of 64 KiB at its start, LUT 0 kept for the driver's
         * shared window; then direct window 0, capped at the LUT's 32 MiB (its offset), its
         * address aligned to its size, its size in 4 KiB pages. */
        .nwindows = 2,
        .windows = {{.size = 32 * NTBF_MiB, .slots = 512, .reserved = 1, .bar = 2},
                    {.size = 32 * NTBF_MiB,
                     .bar = 2,
                     .flags = NTBF_WIN_NATURAL_ALIGN,
                     .addr_align = 4 * NTBF_KiB,
                     .size_align = 4 * NTBF_KiB}},
        .rid_proxy = true,
        .rid_mask = NTBF_RID_MASK_EXPAND, /* an entry is (RID << 16) | enable: no mask */
        .rid_table = 256,                 /* assumption: switchtec-user req_id_table size */
        .rid_reserved = 2,
        .addr_bits = 64,
        .doorbells = 28,
        .scratchpads = 128,
        .spad_window = 64 * NTBF_KiB, /* LUT 0: magic, link state, MW sizes, 128 spads */
        .messages = 0,
        .dma_channels = 0,
        .hop_ns = 170, /* article 8.6: PM8536 PFX */
        .xlat = NTBF_XLAT_OUTBOUND | NTBF_XLAT_INBOUND,
    },
    {
        /* The same partition as Linux's ntb_hw_switchtec sets it up alone (use_lut_mws=1,
         * its defaults): the linux-ntb backend over that driver. */
        .model = "switchtec-pfx-linux",
        .ports = 1,
        .window = 2 * NTBF_MiB, /* the single-window keys, if a file overrides them */
        .lut_entries = 32,
        /* 32 LUT entries of 64 KiB at the start of BAR2 (nr_lut), LUT 0 kept for the
         * driver's shared window; direct MW 0 after them, capped at the same 2 MiB
         * (max_mw_size), its address aligned to its size. */
        .nwindows = 2,
        .windows = {{.size = 2 * NTBF_MiB, .slots = 32, .reserved = 1, .bar = 2},
                    {.size = 2 * NTBF_MiB,
                     .bar = 2,
                     .flags = NTBF_WIN_NATURAL_ALIGN,
                     .addr_align = 4 * NTBF_KiB,
                     .size_align = 4 * NTBF_KiB}},
        .rid_proxy = true,
        .rid_mask = NTBF_RID_MASK_EXPAND,
        .rid_table = 256, /* assumption: switchtec-user req_id_table size */
        .rid_reserved = 2,
        .addr_bits = 64,
        .doorbells = 28,
        .scratchpads = 128,
        .spad_window = 64 * NTBF_KiB,
        .messages = 0,
        .dma_channels = 0,
        .hop_ns = 170, /* article 8.6: PM8536 PFX */
        .xlat = NTBF_XLAT_OUTBOUND | NTBF_XLAT_INBOUND,
    },
    {
        /* A Dolphin adapter (PXH, MXH) as its SISCI library presents it, driven by
         * backends/dolphin (docs/dolphin.md). SISCI answers the window and DMA figures
         * (SCIQuery): the daemon refuses to start when this file says otherwise, naming the
         * figure to set, so these are only where a file starts. */
        .model = "dolphin-sisci",
        .ports = 2,               /* assumption: a PXH830's (SCI_Q_ADAPTER_NUMBER_OF_PORTS) */
        .window = 256 * NTBF_MiB, /* Dolphin factory default prefetchable BAR */
        .lut_entries = 256,       /* assumption: the ATT's entries (SCI_Q_ADAPTER_ATT_*) */
        /* A slot is a segment: any page-aligned range of this many bytes at most. */
        .nwindows = 1,
        .windows = {{.size = 256 * NTBF_MiB,
                     .slots = 256,
                     .addr_align = 4 * NTBF_KiB,
                     .size_align = 4 * NTBF_KiB}},
        .rid_table = 0, /* SmartIO registers requesters itself: nothing to budget */
        .rid_reserved = 0,
        .addr_bits = 64,  /* assumption */
        .doorbells = 0,   /* SISCI has none */
        .scratchpads = 0, /* SISCI has none */
        .messages = 0,
        .dma_channels = 4,         /* assumption: DMA queues handed out per process */
        .hop_ns = 132,             /* the pxh830's: article 8.6 */
        .xlat = NTBF_XLAT_INBOUND, /* a slot is a segment the memory's host makes */
        .managed = true,           /* SmartIO maps devices' DMA (SCIMap*SegmentForDevice) */
    },
    {
        /* Shared memory between two QEMU guests (ivshmem-plain), presented as one link by
         * backends/ivshmem (docs/vm.md): every figure is that backend's choice. */
        .model = "ivshmem",
        .ports = 1,
        .window = 8 * NTBF_MiB, /* half of a 16 MiB region: the other side's half */
        .lut_entries = 32,      /* slots of 256 KiB, applied when the window is mapped */
        .rid_table = 0,         /* nothing to enforce: no requesters cross */
        .rid_reserved = 0,
        .addr_bits = 64,
        .doorbells = 64, /* bits in the control block, polled */
        .scratchpads = 16,
        .messages = 0,
        .dma_channels = 0,
        .hop_ns = 0, /* assumption: a shared page costs what local memory costs */
        .xlat = NTBF_XLAT_OUTBOUND | NTBF_XLAT_INBOUND,
    },
};

static const struct ntbf_switch_params switch_presets[] = {
    {
        /* Dolphin MXS824: 24 x4 Gen3 ports, PM8536 PFX (article 8.6). */
        .model = "mxs824",
        .ports = 24,
        .rid_table = 256,   /* assumption */
        .mcast_groups = 64, /* PCIe multicast capability MAXGROUP limit */
        .hop_ns = 170,      /* article 8.6 */
    },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

const struct ntbf_adapter_params *ntbf_adapter_preset_at(size_t i)
{
        return i < ARRAY_LEN(adapter_presets) ? &adapter_presets[i] : NULL;
}

const struct ntbf_switch_params *ntbf_switch_preset_at(size_t i)
{
        return i < ARRAY_LEN(switch_presets) ? &switch_presets[i] : NULL;
}

const struct ntbf_adapter_params *ntbf_adapter_preset(const char *model)
{
        for (size_t i = 0; model && i < ARRAY_LEN(adapter_presets); i++)
                if (!strcasecmp(adapter_presets[i].model, model))
                        return &adapter_presets[i];
        return NULL;
}

const struct ntbf_switch_params *ntbf_switch_preset(const char *model)
{
        for (size_t i = 0; model && i < ARRAY_LEN(switch_presets); i++)
                if (!strcasecmp(switch_presets[i].model, model))
                        return &switch_presets[i];
        return NULL;
}
