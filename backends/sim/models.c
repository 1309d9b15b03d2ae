/* backends/sim/models.c: which simulated device model runs a topology device. */
#include "devmodel.h"

const struct ntbf_sim_model_ops *ntbf_sim_model_for(const struct ntbf_device *d)
{
        switch (d->sim.model) {
        case NTBF_SIM_NVME:
                return &ntbf_sim_nvme_ops;
        case NTBF_SIM_ACCEL:
                return &ntbf_sim_accel_ops;
        case NTBF_SIM_NONE:
                break;
        }
        return NULL;
}
