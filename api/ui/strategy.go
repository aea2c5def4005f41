package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/strategy"
)

// previewMaxDefault and previewMax bound the chunks the strategy page previews.
const (
	previewMaxDefault = 20
	previewMax        = 1000
)

// strategyView is the strategy page: the form, the parsed tree or the error, the preview.
type strategyView struct {
	Text      string
	Max       int
	Canonical string // the text form, written out
	JSON      string
	Tree      *treeNode
	ErrPath   string
	Error     string
	Chunks    []previewRow
	Order     []string // submissions in the order of their first chunk
}

type treeNode struct {
	Label    string
	Children []treeNode
}

type previewRow struct {
	SubmissionID string
	ChunkIndex   int32
	Strategic    string
}

func tree(n strategy.Node) treeNode {
	t := treeNode{Label: string(n.Kind)}
	switch n.Kind {
	case strategy.SelectOnly:
		t.Label += fmt.Sprintf(" %s = %s", n.Key, n.Value)
	case strategy.PreferDistinct, strategy.MaxSimultaneous:
		t.Label += fmt.Sprintf(" %s, max %s", n.Key, num(int64(n.Max)))
	case strategy.RateLimit:
		t.Label += fmt.Sprintf(" %s, %s/s, burst %s", n.Key, strconv.FormatFloat(n.PerSecond, 'f', -1, 64), num(int64(n.Burst)))
	case strategy.WeightedFair:
		t.Label += fmt.Sprintf(" %s, %d weights, default %s", n.Key, len(n.Weights), num(int64(n.DefaultWeight)))
	}
	for _, c := range []*strategy.Node{n.Then, n.First, n.Fallback} {
		if c != nil {
			t.Children = append(t.Children, tree(*c))
		}
	}
	return t
}

func (d *dashboard) strategy(c echo.Context) error {
	v := strategyView{Text: c.QueryParam("strategy"), Max: previewMaxDefault}
	if m := c.QueryParam("max"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > previewMax {
			v.Error = fmt.Sprintf("max: must be between 1 and %s", num(previewMax))
		}
		v.Max = n
	}
	if v.Text == "" {
		v.Text = "random"
	}
	var node strategy.Node
	if v.Error == "" {
		var err error
		node, err = strategy.ParseAny(v.Text)
		var se *strategy.Error
		switch {
		case errors.As(err, &se):
			v.ErrPath, v.Error = se.Path, se.Message
		case err != nil:
			v.Error = err.Error()
		}
	}
	if v.Error == "" {
		t := tree(node)
		v.Tree, v.Canonical = &t, node.String()
		b, _ := json.Marshal(node)
		v.JSON = string(b)
		chunks, err := d.q.Preview(c.Request().Context(), queuer.ReserveRequest{Max: v.Max, Strategy: node, Lease: wire.LeaseDefault})
		if err != nil {
			return err
		}
		seen := map[int64]bool{}
		for _, ch := range chunks {
			id := strconv.FormatInt(ch.SubmissionID, 10)
			v.Chunks = append(v.Chunks, previewRow{SubmissionID: id, ChunkIndex: ch.ChunkIndex, Strategic: string(ch.StrategicMetadata)})
			if !seen[ch.SubmissionID] {
				seen[ch.SubmissionID] = true
				v.Order = append(v.Order, id)
			}
		}
	}
	// A form with an error is still a page that loaded: 200.
	return d.render(c, http.StatusOK, "strategy", page{Title: "Strategy preview", Nav: "strategy", Data: v})
}
