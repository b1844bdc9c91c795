package sim
import ("testing";"fmt";"strings")
func TestProbe(t *testing.T){
	maxExamples = 2000
	rep, _ := Run(Config{Seed: 2, Sagas: 1000, Poison: 3})
	for _, e := range rep.Examples { if strings.HasPrefix(e, "compensation_exact") || strings.HasPrefix(e, "nothing_lost") { fmt.Println(e) } }
}
