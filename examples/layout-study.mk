# A layout study as a Makefile: trace the model once, then shard, cost, simulate, account
# memory and report every layout as its own targets, which `make -j` runs in parallel, and
# join the reports into a CSV table and a plot.
#
#   make -f examples/layout-study.mk -j2 OUT=study
#
# writes study/study.csv (one row per layout), study/study.svg (MFU per layout, drawn by
# `syssim sweep --merge --plot`) and study/study.txt (the same points as a sweep table, with
# the best one). A layout is named by its flags: tp2_pp2_dp2 is --tp 2 --pp 2 --dp 2. Change
# the job with MODEL, HARDWARE, LAYOUTS and JOB (the flags every layout shares). A rerun
# remakes only what is out of date. The tools come from PATH, or from build/bin when they
# are not on it. Needs jq.

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
MODEL ?= $(ROOT)/configs/models/llama3-8b.yaml
HARDWARE ?= $(ROOT)/configs/hardware/h100-sxm-80gb.yaml
OUT ?= layout-study
LAYOUTS ?= tp1_dp8 tp2_dp4 tp4_dp2 tp8_dp1 tp2_pp2_dp2 tp4_pp2_dp1
JOB ?= --sp --distributed-optimizer --micro-batch 1 --global-batch 32 --seq-length 4096

export PATH := $(if $(shell command -v syssim-trace),$(PATH),$(ROOT)/build/bin:$(PATH))
SHELL := bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:
.SECONDARY:

# tp2_pp2_dp2 -> --tp 2 --pp 2 --dp 2
flags = $(shell sed -E 's/([a-z]+)([0-9]+)/--\1 \2/g; s/_/ /g' <<< '$(1)')

all: $(OUT)/study.csv $(OUT)/study.svg

$(OUT):
	mkdir -p $@

# The trace depends on the architecture only: once for every layout.
$(OUT)/trace.graph: $(MODEL) | $(OUT)
	syssim-trace $< -o $@

$(OUT)/%.shard.graph: $(OUT)/trace.graph
	syssim-shard -i $< $(call flags,$*) $(JOB) -o $@

$(OUT)/%.cost.graph: $(OUT)/%.shard.graph $(HARDWARE)
	syssim-cost --hardware $(HARDWARE) -i $< -o $@

$(OUT)/%.sim.graph: $(OUT)/%.cost.graph
	syssim-sim -i $< -o $@

$(OUT)/%.mem.graph: $(OUT)/%.sim.graph
	syssim-mem -i $< -o $@

$(OUT)/%.report.json: $(OUT)/%.mem.graph
	syssim-report --format json -i $< -o $@

# The report as a one-point sweep result, which `syssim sweep --merge` reads.
define point_of_report
{points: [{inputs: {"parallelism.tp": .parallelism.tp, "parallelism.pp": .parallelism.pp,
                    "parallelism.dp": .parallelism.dp},
           status: (if .bottlenecks.oom then "oom" else "ok" end),
           step_time_ms, mfu, peak_memory_gb, step_time_band_ms,
           reason: (if .bottlenecks.oom then "needs \(.bottlenecks.oom.required_gb) GB" else "" end)}]}
endef
# One CSV row of a report, after the layout's name.
define row_of_report
[$$layout, .parallelism.tp, .parallelism.pp, .parallelism.dp, .step_time_ms, .mfu, .peak_memory_gb,
 .bottlenecks.oom != null] | map(tostring) | join(",")
endef
export point_of_report row_of_report

$(OUT)/%.point.json: $(OUT)/%.report.json
	jq "$$point_of_report" $< > $@

$(OUT)/study.csv: $(LAYOUTS:%=$(OUT)/%.report.json)
	{ echo "layout,tp,pp,dp,step_time_ms,mfu,peak_memory_gb,oom"; \
	  for report in $^; do jq -r --arg layout "$$(basename "$$report" .report.json)" "$$row_of_report" "$$report"; done; \
	} > $@

$(OUT)/study.svg: $(LAYOUTS:%=$(OUT)/%.point.json)
	syssim sweep --merge $^ --plot $@ -o $(OUT)/study.txt

.PHONY: all
