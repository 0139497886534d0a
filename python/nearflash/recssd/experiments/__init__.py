"""RecSSD's paper figures: ``nearflash experiment recssd <name>|all [--quick] [--set key=value]``.

Each experiment writes JSON + Markdown + PNG with our numbers beside the paper's (see ``nearflash.experiment``).
``--set`` options (each experiment reads the ones it uses; `nearflash experiment recssd --help` lists them with their defaults): ``models=RM1,WND``, ``batches=1,8,64``, ``batch=64``,
``n=<measured batches>``, ``warm_lookups=<per table>`` (Figs. 6, 10), ``ks=0,1,2`` (Fig. 10), ``dims=``,
``tables=``, ``lookups=``, ``precisions=fp32,fp16,int8``, ``base=RM3`` (Fig. 11), ``loads=``, ``accesses=`` (calibrate)."""

from __future__ import annotations

from nearflash.recssd.experiments import calibrate, fig5, fig6, fig8, fig9, fig10, fig11

EXPERIMENTS = {
    "fig5": ("Fig. 5: the SLS operator alone, tables in DRAM vs on a conventional SSD, over batch sizes", fig5.run_fig5),
    "fig6": ("Fig. 6: SSD vs DRAM slowdown per model (batch 64)", fig6.run_fig6),
    "fig8": ("Fig. 8: SLS operator, SEQ vs STR, conventional vs NDP, with the NDP time breakdown", fig8.run_fig8),
    "fig9": ("Fig. 9: naive end-to-end speed-up of RecSSD over a conventional SSD", fig9.run_fig9),
    "fig10": ("Fig. 10: speed-up with caching (SSD cache; static partition), batch 1-32, K = 0, 1, 2", fig10.run_fig10),
    "fig11": ("Fig. 11: sensitivity to feature size, table count and lookups per table", fig11.run_fig11),
    "calibrate": ("Calibration: the fit of the two firmware costs to Figs. 8-10", calibrate.run_calibrate),
}
