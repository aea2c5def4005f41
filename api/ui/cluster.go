package ui

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/queuer"
)

// clusterView is the cluster page, and the JSON its script refreshes it from.
type clusterView struct {
	ShardCount int            `json:"shard_count"`
	Cells      []cellView     `json:"cells"`
	Instances  []instanceView `json:"instances"`
	Unclaimed  int            `json:"unclaimed"`
	Disabled   int            `json:"disabled"`
	// Picked is the shard whose details the page shows (?shard=); nil for none.
	Picked *cellView `json:"-"`
}

// cellView is one shard of the shard map.
type cellView struct {
	Shard      int    `json:"shard"`
	Owner      string `json:"owner"`
	State      string `json:"state"` // active, draining, unclaimed, disabled
	Generation int64  `json:"generation"`
	Inflight   int    `json:"inflight"`
	Color      string `json:"color"`
	Title      string `json:"title"`
}

func clusterData(cl queuer.Cluster, now time.Time) clusterView {
	v := clusterView{ShardCount: cl.ShardCount, Instances: instanceViews(cl, now), Unclaimed: len(cl.Unclaimed), Disabled: len(cl.Disabled)}
	v.Cells = make([]cellView, cl.ShardCount)
	for i := range v.Cells {
		v.Cells[i] = cellView{Shard: i, State: "unclaimed", Color: "#ffffff"}
	}
	for i, in := range cl.Instances {
		for _, s := range in.Shards {
			if s.Shard >= len(v.Cells) {
				continue
			}
			cell := &v.Cells[s.Shard]
			cell.Owner, cell.Generation, cell.Inflight, cell.Color, cell.State = in.ID, s.Generation, s.Inflight, v.Instances[i].Color, "active"
			if s.Draining {
				cell.State = "draining"
			}
		}
	}
	for _, s := range cl.Disabled {
		if s < len(v.Cells) {
			v.Cells[s].State, v.Cells[s].Color = "disabled", "#333333"
		}
	}
	for i := range v.Cells {
		c := &v.Cells[i]
		owner := c.Owner
		if owner == "" {
			owner = "nobody"
		}
		c.Title = fmt.Sprintf("shard %d · %s · owner %s · generation %s · in flight %s", c.Shard, c.State, owner, num(c.Generation), num(int64(c.Inflight)))
	}
	return v
}

func (d *dashboard) cluster(c echo.Context) error {
	cl, err := d.q.Cluster(c.Request().Context())
	if err != nil {
		return err
	}
	v := clusterData(cl, time.Now())
	if s := c.QueryParam("shard"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= len(v.Cells) {
			return d.fail(c, http.StatusBadRequest, "shard: %q is not a shard number (0 to %d)", cut(s, 40), len(v.Cells)-1)
		}
		v.Picked = &v.Cells[n]
	}
	return d.render(c, http.StatusOK, "cluster", page{Title: "Cluster", Nav: "cluster", Live: "cluster", Data: v})
}

func (d *dashboard) clusterJSON(c echo.Context) error {
	cl, err := d.q.Cluster(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, clusterData(cl, time.Now()))
}

// The administrative actions of the cluster page, each the operators' recipe of the same
// name (sql/admin/).
var actions = map[string]struct {
	question string // with the instance or the shard
	shard    bool
	on       bool
}{
	"drain":   {"Drain instance %s? It stops handing out chunks and releases its shards as soon as nothing of them is in flight; the others take them over.", false, true},
	"undrain": {"Undrain instance %s? It claims its share of the shards again.", false, false},
	"disable": {"Disable shard %s? It is taken from its owner at once (its reservations are dropped) and its chunks are not handed out until it is enabled again.", true, true},
	"enable":  {"Enable shard %s? It may be claimed again.", true, false},
}

func (d *dashboard) confirmAction(c echo.Context) error {
	name, target, err := d.actionArgs(c.QueryParam("action"), c.QueryParam("target"))
	if err != nil {
		return d.fail(c, http.StatusBadRequest, "%s", err)
	}
	a := actions[name]
	return d.render(c, http.StatusOK, "confirm", page{Title: "Confirm", Nav: "cluster", Data: confirmView{
		Question: fmt.Sprintf(a.question, target), Action: "/ui/cluster/action",
		Fields: map[string]string{"action": name, "target": target}, Back: "/ui/cluster",
	}})
}

func (d *dashboard) action(c echo.Context) error {
	name, target, err := d.actionArgs(c.FormValue("action"), c.FormValue("target"))
	if err != nil {
		return d.fail(c, http.StatusBadRequest, "%s", err)
	}
	a, ctx := actions[name], c.Request().Context()
	if a.shard {
		shard, _ := strconv.Atoi(target)
		err = d.q.SetShardDisabled(ctx, shard, a.on)
	} else {
		err = d.q.SetDraining(ctx, target, a.on)
	}
	if notFound(err) {
		return d.fail(c, http.StatusNotFound, "no such %s: %s", map[bool]string{true: "shard", false: "instance"}[a.shard], target)
	}
	if err != nil {
		return err
	}
	d.log.InfoContext(ctx, "dashboard action", "action", name, "target", target)
	if a.shard { // back to the shard's details, which show what the action did
		return c.Redirect(http.StatusSeeOther, "/ui/cluster?shard="+target)
	}
	return c.Redirect(http.StatusSeeOther, "/ui/cluster")
}

func (d *dashboard) actionArgs(name, target string) (string, string, error) {
	a, ok := actions[name]
	switch {
	case !ok:
		return "", "", fmt.Errorf("action: must be drain, undrain, disable or enable")
	case target == "" || len(target) > 256:
		return "", "", fmt.Errorf("target: an instance id or a shard number is required")
	case a.shard:
		if n, err := strconv.Atoi(target); err != nil || n < 0 {
			return "", "", fmt.Errorf("target: %q is not a shard number", target)
		}
	}
	return name, target, nil
}
